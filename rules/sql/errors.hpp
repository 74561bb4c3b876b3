// Why a statement could not be read: a boost::system error category for the SQL recognizer.
#pragma once

#include <boost/system/error_code.hpp>

namespace claimguard::rules::sql {

enum class errc {
    ok = 0,
    unterminated_literal,  // a string, quoted identifier or comment runs past the end
    malformed_literal,     // X'..' with odd or non-hex digits, b'..' with other than 0/1
    unterminated_version,  // the text ends inside /*! ... */
    statement_too_long,    // longer than max_statement_bytes
    too_many_tokens,       // more than max_statement_tokens significant tokens
};

const boost::system::error_category& sql_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), sql_category()}; }

}  // namespace claimguard::rules::sql

namespace boost::system {
template <>
struct is_error_code_enum<claimguard::rules::sql::errc> : std::true_type {};
}  // namespace boost::system
