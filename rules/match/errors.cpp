// Messages of the rewriter's error category.
#include "rules/match/errors.hpp"

#include <string>

namespace claimguard::rules::match {
namespace {

class category final : public boost::system::error_category {
public:
    const char* name() const noexcept override { return "claimguard.rewrite"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
            case errc::ok: return "ok";
            case errc::not_an_update: return "the statement is not the UPDATE the fact describes";
            case errc::amount_not_positive: return "a decrement must take at least one unit";
            case errc::amount_out_of_range: return "floor + amount does not fit in a 64-bit integer";
            case errc::amount_not_integer: return "the amount is not an integer literal or a placeholder";
            case errc::key_not_bindable: return "a key value is not a literal or a placeholder";
            case errc::amount_needs_value:
                return "the amount is a placeholder and the floor is not 0: rewrite when the value is bound";
        }
        return "unknown rewriter error";
    }
};

}  // namespace

const boost::system::error_category& match_category() noexcept {
    static const category instance;
    return instance;
}

}  // namespace claimguard::rules::match
