// libFuzzer target: any bytes as rules files give a rule set or located errors, never a crash or a hang.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rules/model/ddl.hpp"
#include "rules/model/rules.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    namespace rules = claimguard::rules;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    // A NUL splits the input into two files (NUL cannot occur in a valid file), so the
    // cross-file checks are explored too.
    std::vector<rules::rules_source> sources;
    if (const auto nul = input.find('\0'); nul != std::string_view::npos)
        sources = {{"a.yaml", std::string(input.substr(0, nul))}, {"b.yaml", std::string(input.substr(nul + 1))}};
    else
        sources = {{"a.yaml", std::string(input)}};

    const auto result = rules::load_rules(sources);
    if (result.rules.has_value() == !result.errors.empty())
        __builtin_trap();  // exactly one of: a rule set, or errors
    for (const auto& e : result.errors)
        if (e.pos.line < 1 || e.pos.column < 1 || e.message.empty())
            __builtin_trap();
    if (result.rules) {
        const auto ddl = rules::render_ddl(*result.rules);
        if (ddl.empty() || ddl.back() != '\n')
            __builtin_trap();
        for (const auto& stock : result.rules->stocks)
            if (result.rules->find_stock(stock.name) == nullptr)
                __builtin_trap();
    }
    return 0;
}
