// A command-line flag that takes a duration in claimguard's one syntax ("250ms", "1.5s", "2m"),
// for the subcommands that declare their flags with CLI11 directly (check, inject). Include it
// only where <CLI/CLI.hpp> is already included: it is the CLI layer, not the settings layer.
#pragma once

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "rules/model/duration.hpp"

namespace claimguard::config {

// --flag DURATION into `target`; --help shows DURATION and the default as it was set before.
inline CLI::Option* add_duration_flag(CLI::App& cmd, const std::string& flag, std::chrono::milliseconds& target,
                                      const std::string& help) {
    auto* opt = cmd.add_option_function<std::string>(
        flag,
        [&target, flag](const std::string& text) {
            const auto parsed = duration::parse(text);
            if (!parsed.value) throw CLI::ValidationError(flag, duration::describe(parsed, text));
            target = *parsed.value;
        },
        help);
    opt->type_name("DURATION");
    opt->default_str(duration::format(target));
    return opt;
}

// A duration as whole seconds for APIs that count seconds (libmysqlclient's timeouts): rounded up,
// so "1500ms" waits 2 s rather than 1, and never 0 (which would mean "no timeout").
[[nodiscard]] inline std::chrono::seconds whole_seconds_up(std::chrono::milliseconds d) {
    const auto s = std::chrono::ceil<std::chrono::seconds>(d);
    return s.count() < 1 ? std::chrono::seconds{1} : s;
}

}  // namespace claimguard::config
