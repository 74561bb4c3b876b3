// Why the rewriter refused to build SQL: a boost::system error category.
#pragma once

#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

namespace claimguard::rules::match {

enum class errc {
    ok = 0,
    not_an_update,          // the statement is not the UPDATE the fact came from
    amount_not_positive,    // a decrement of 0 or fewer units
    amount_out_of_range,    // floor + N does not fit in 64 bits
    amount_not_integer,     // the written amount is not an integer literal or a placeholder
    key_not_bindable,       // a key value is neither a literal nor a placeholder
    amount_needs_value,     // a placeholder amount with a non-zero floor: rewrite once it is bound
};

const boost::system::error_category& match_category() noexcept;

inline boost::system::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), match_category()}; }

template <class T>
using result = boost::system::result<T>;

}  // namespace claimguard::rules::match

namespace boost::system {
template <>
struct is_error_code_enum<claimguard::rules::match::errc> : std::true_type {};
}  // namespace boost::system
