// The one duration syntax of claimguard (issue 22): flags, CLAIMGUARD_* variables, the config file
// and the rules file all read "250ms", "1.5s", "2m", "8h". A unit is required: a bare "2" meant
// milliseconds in some places and seconds in others, so it is an error everywhere.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace claimguard::duration {

// What every error message offers as the accepted forms.
inline constexpr std::string_view accepted_forms = "a number with a unit: 250ms, 1.5s, 2m or 8h (units ms, s, m, h)";

enum class problem {
    none,
    empty,
    no_unit,       // "2": a bare number
    unknown_unit,  // "3d", "5sec", "5S"
    malformed,     // "soon", "-1s", "1m30s", ".5s", "5 s"
    too_fine,      // "0.5ms", "1.0001s": below the millisecond
    too_large,     // beyond 2^53 ms
};

struct parsed {
    std::optional<std::chrono::milliseconds> value;
    enum problem problem = problem::none;
};

// Parses a non-negative decimal number (an optional fraction) followed by ms, s, m or h.
[[nodiscard]] parsed parse(std::string_view text);

// Why `text` was refused, as a phrase after the value: "has no unit; expected a number with a unit: ...".
[[nodiscard]] std::string describe(const parsed& p, std::string_view text);

// The largest unit that states `d` exactly: 24h, 90s, 1500ms (what --help and --print-config show).
[[nodiscard]] std::string format(std::chrono::milliseconds d);

}  // namespace claimguard::duration
