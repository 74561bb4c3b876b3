// Checks on the raw text of a rules file before yaml-cpp sees it: size, encoding, tabs, nesting.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace claimguard::rules {

struct text_problem {
    int line = 1;    // 1-based
    int column = 1;  // 1-based, in bytes like yaml-cpp's marks
    std::string message;
};

// Problems that stop a file from being parsed: too large, not UTF-8, control characters,
// tabs used for indentation, nesting deeper than max_yaml_nesting_depth (yaml-cpp recurses
// per level). Empty when the text may be handed to yaml-cpp. `text` has no byte-order mark.
[[nodiscard]] std::vector<text_problem> precheck_rules_text(std::string_view text);

// The text without a leading UTF-8 byte-order mark.
[[nodiscard]] std::string_view strip_utf8_bom(std::string_view text);

}  // namespace claimguard::rules
