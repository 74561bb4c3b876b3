// The duration syntax shared by the config and the rules (see duration.hpp).
#include "rules/model/duration.hpp"

#include <cstdint>

namespace claimguard::duration {

namespace {
constexpr std::int64_t max_ms = std::int64_t{1} << 53;  // about 285,000 years: nothing sane is longer
constexpr std::size_t max_digits = 16;                  // keeps the arithmetic below within 64 bits

bool is_digit(char c) { return c >= '0' && c <= '9'; }
}  // namespace

parsed parse(std::string_view text) {
    if (text.empty()) return {std::nullopt, problem::empty};
    std::size_t i = 0;
    while (i < text.size() && is_digit(text[i])) ++i;
    const std::size_t int_digits = i;
    std::size_t frac_digits = 0;
    if (i < text.size() && text[i] == '.') {
        ++i;
        while (i < text.size() && is_digit(text[i])) ++i, ++frac_digits;
        if (frac_digits == 0) return {std::nullopt, problem::malformed};
    }
    if (int_digits == 0) return {std::nullopt, problem::malformed};
    const auto unit = text.substr(i);
    if (unit.empty()) return {std::nullopt, problem::no_unit};
    std::int64_t scale = 0;
    if (unit == "ms")
        scale = 1;
    else if (unit == "s")
        scale = 1000;
    else if (unit == "m")
        scale = 60'000;
    else if (unit == "h")
        scale = 3'600'000;
    else {
        for (char c : unit)
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return {std::nullopt, problem::malformed};
        return {std::nullopt, problem::unknown_unit};
    }
    // Leading zeros do not count towards the size limit.
    std::size_t first = 0;
    while (first + 1 < int_digits && text[first] == '0') ++first;
    if (int_digits - first > max_digits) return {std::nullopt, problem::too_large};
    std::int64_t whole = 0;
    for (std::size_t k = first; k < int_digits; ++k) whole = whole * 10 + (text[k] - '0');
    if (whole > max_ms / scale) return {std::nullopt, problem::too_large};
    std::int64_t ms = whole * scale;
    if (frac_digits > 0) {
        // fraction * scale must be a whole number of milliseconds: trailing zeros are free.
        auto frac = text.substr(int_digits + 1, frac_digits);
        while (!frac.empty() && frac.back() == '0') frac.remove_suffix(1);
        if (frac.size() > 7) return {std::nullopt, problem::too_fine};  // h has 3.6e6 ms: 7 places at most
        std::int64_t num = 0, den = 1;
        for (char c : frac) num = num * 10 + (c - '0'), den *= 10;
        if ((num * scale) % den != 0) return {std::nullopt, problem::too_fine};
        ms += num * scale / den;
        if (ms > max_ms) return {std::nullopt, problem::too_large};
    }
    return {std::chrono::milliseconds(ms), problem::none};
}

std::string describe(const parsed& p, std::string_view text) {
    const std::string q = "'" + std::string(text) + "'";
    const std::string forms(accepted_forms);
    switch (p.problem) {
        case problem::none: return {};
        case problem::empty: return "is empty; expected " + forms;
        case problem::no_unit: return q + " has no unit; expected " + forms;
        case problem::unknown_unit: return q + " has an unknown unit; expected " + forms;
        case problem::malformed: return q + " is not a duration; expected " + forms;
        case problem::too_fine: return q + " is finer than a millisecond";
        case problem::too_large: return q + " is too large";
    }
    return {};
}

std::string format(std::chrono::milliseconds d) {
    const auto ms = d.count();
    if (ms != 0 && ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
    if (ms != 0 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
    return std::to_string(ms) + "ms";
}

}  // namespace claimguard::duration
