// Messages of the SQL recognizer's error category.
#include "rules/sql/errors.hpp"

#include <string>

namespace claimguard::rules::sql {
namespace {

class category final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "claimguard.sql"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
            case errc::ok: return "ok";
            case errc::unterminated_literal: return "a string, quoted name or comment is not closed";
            case errc::malformed_literal: return "a hexadecimal or bit literal is malformed";
            case errc::unterminated_version: return "a versioned comment /*! ... */ is not closed";
            case errc::statement_too_long: return "the statement is longer than the recognizer reads";
            case errc::too_many_tokens: return "the statement has more tokens than the recognizer reads";
        }
        return "unknown SQL recognizer error";
    }
};

}  // namespace

const boost::system::error_category& sql_category() noexcept {
    static const category instance;
    return instance;
}

}  // namespace claimguard::rules::sql
