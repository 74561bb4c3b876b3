// docs/RULES.md and the rule reader agree: every field the reader knows has a row in the field table of its
// section (required as the reader requires it), and every row there is a field the reader knows.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include "rules/model/parsed_rules.hpp"

namespace claimguard::rules::test {
namespace {

// The section of docs/RULES.md that documents each mapping the reader reads (named as in its errors).
const std::map<std::string, std::string, std::less<>> section_of = {
    {"the rules file", "Top level"}, {"a stock rule", "Stock rules"}, {"admission", "admission"},
    {"group_update", "group_update"}, {"reserve", "reserve"},
    {"a claim rule", "Claim rules"}, {"consumes", "consumes"},        {"redis", "redis"},
};

// Section heading -> field -> required, from the tables whose header starts with `| field |`. A row's first
// cell is the field in backticks; a `required` column, when the table has one, says yes or no.
std::map<std::string, std::map<std::string, bool>> read_field_tables(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in) << "cannot open " << path;
    std::map<std::string, std::map<std::string, bool>> sections;
    std::string heading;
    bool in_code = false;  // a fenced code block: its '#' lines are YAML comments, not headings
    bool in_field_table = false;
    bool has_required_column = false;
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("```")) in_code = !in_code;
        if (in_code) {
            continue;
        } else if (line.starts_with("#")) {
            heading = line.substr(line.find_first_not_of('#'));
            heading.erase(0, heading.find_first_not_of(' '));
            in_field_table = false;
        } else if (line.starts_with("| field |")) {
            in_field_table = true;
            has_required_column = line.starts_with("| field | required |");
        } else if (!line.starts_with("|")) {
            in_field_table = false;
        } else if (in_field_table && line.starts_with("| `")) {
            const auto end = line.find('`', 3);
            const std::string name = line.substr(3, end - 3);
            const auto second_cell = line.find('|', end) + 1;
            sections[heading][name] = has_required_column && line.compare(second_cell, 5, " yes ") == 0;
        }
    }
    return sections;
}

TEST(docs_fields, every_reader_field_is_documented_in_its_section_and_no_other) {
    const std::string path = std::string(CLAIMGUARD_SOURCE_DIR) + "/docs/RULES.md";
    const auto doc = read_field_tables(path);
    for (const auto& mapping : detail::known_fields()) {
        const auto section = section_of.find(mapping.mapping);
        ASSERT_NE(section, section_of.end())
            << "the reader reads a mapping '" << mapping.mapping << "' this test does not know: add its docs/RULES.md "
            << "section to section_of";
        const auto rows = doc.find(section->second);
        if (rows == doc.end()) {
            ADD_FAILURE() << "docs/RULES.md has no field table under a heading '" << section->second << "', for "
                          << mapping.mapping;
            continue;
        }
        std::set<std::string> known;
        for (const auto& f : mapping.fields) {
            known.emplace(f.name);
            const auto row = rows->second.find(std::string(f.name));
            if (row == rows->second.end()) {
                ADD_FAILURE() << "docs/RULES.md, section '" << section->second << "': no row for field '" << f.name
                              << "', which " << mapping.mapping << " may hold";
                continue;
            }
            EXPECT_EQ(row->second, f.required)
                << "docs/RULES.md, section '" << section->second << "': field '" << f.name << "' is "
                << (f.required ? "required" : "optional") << " in the reader";
        }
        for (const auto& [name, required] : rows->second)
            EXPECT_TRUE(known.contains(name)) << "docs/RULES.md, section '" << section->second << "' documents field '"
                                              << name << "', which the reader refuses in " << mapping.mapping;
    }
}

}  // namespace
}  // namespace claimguard::rules::test
