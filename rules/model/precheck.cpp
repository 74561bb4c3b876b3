// Checks on the raw text of a rules file before yaml-cpp sees it: size, encoding, tabs, nesting.
#include "rules/model/precheck.hpp"

#include <algorithm>
#include <cstdio>

#include "rules/model/limits.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules {
namespace {

struct line_col {
    int line = 1;
    int column = 1;
};

line_col position_of(std::string_view text, std::size_t offset) {
    line_col p;
    for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
        if (text[i] == '\n') {
            ++p.line;
            p.column = 1;
        } else {
            ++p.column;
        }
    }
    return p;
}

std::string byte_hex(unsigned char b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", b);
    return buf;
}

std::vector<text_problem> check_encoding(std::string_view text) {
    if (const auto bad = first_invalid_utf8(text)) {
        const auto p = position_of(text, *bad);
        return {{p.line, p.column,
                 "the file is not valid UTF-8 (byte " + byte_hex(static_cast<unsigned char>(text[*bad])) +
                     "); save it as UTF-8"}};
    }
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto b = static_cast<unsigned char>(text[i]);
        if ((b < 0x20 && b != '\t' && b != '\n' && b != '\r') || b == 0x7F) {
            const auto p = position_of(text, i);
            return {{p.line, p.column,
                     "the file contains the control character " + byte_hex(b) +
                         "; a rules file is plain text (is this a binary file?)"}};
        }
    }
    return {};
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Walks the text once, line by line, tracking quoted scalars, comments and flow brackets.
// The depth is an upper estimate: block indentation levels, compact "- "/"? " indicators and
// open flow brackets. Over-estimating only matters past max_yaml_nesting_depth.
class structure_scanner {
public:
    explicit structure_scanner(std::string_view text) : text_(text) {}

    std::vector<text_problem> run() {
        std::size_t line_start = 0;
        int line_no = 1;
        while (line_start <= text_.size() && problems_.size() < max_diagnostics) {
            auto line_end = text_.find('\n', line_start);
            if (line_end == std::string_view::npos)
                line_end = text_.size();
            scan_line(text_.substr(line_start, line_end - line_start), line_no);
            if (depth_exceeded_)
                break;
            line_start = line_end + 1;
            ++line_no;
        }
        return std::move(problems_);
    }

private:
    void scan_line(std::string_view line, int line_no) {
        if (!line.empty() && line.back() == '\r')
            line.remove_suffix(1);
        std::size_t i = 0;
        if (quote_ == 0 && flow_depth_ == 0) {
            // Leading blanks and compact indicators ("- - x", "? x") form the indentation.
            std::size_t content = 0;
            int indicators = 0;
            int indent = -1;
            for (;; ++content) {
                while (content < line.size() && is_blank(line[content]))
                    ++content;
                if (indent < 0)
                    indent = static_cast<int>(content);
                if (content < line.size() && (line[content] == '-' || line[content] == '?') &&
                    (content + 1 == line.size() || is_blank(line[content + 1]))) {
                    ++indicators;
                    continue;
                }
                break;
            }
            const bool blank = indicators == 0 && (content == line.size() || line[content] == '#');
            // yaml-cpp refuses a tab in column 1 even on a blank or comment line.
            const auto tab = line.substr(0, blank ? std::min<std::size_t>(1, content) : content).find('\t');
            if (tab != std::string_view::npos) {
                problems_.push_back({line_no, static_cast<int>(tab) + 1,
                                     "a tab is used for indentation here; YAML indents with spaces only"});
                return;
            }
            if (blank)
                return;  // blank or comment-only lines do not change the structure
            while (!indents_.empty() && indents_.back() > indent)
                indents_.pop_back();
            if (indents_.empty() || indents_.back() < indent)
                indents_.push_back(indent);
            block_depth_ = static_cast<int>(indents_.size()) + indicators;
            if (check_depth(block_depth_, line_no, content))
                return;
            i = content;
        }
        char prev = ' ';
        while (i < line.size()) {
            const char c = line[i];
            std::size_t step = 1;
            if (quote_ == '"') {
                if (c == '\\')
                    step = 2;  // the escaped character cannot close the string
                else if (c == '"')
                    quote_ = 0;
            } else if (quote_ == '\'') {
                if (c == '\'' && i + 1 < line.size() && line[i + 1] == '\'')
                    step = 2;  // '' is an escaped quote
                else if (c == '\'')
                    quote_ = 0;
            } else if (c == '#' && is_blank(prev)) {
                return;
            } else if ((c == '"' || c == '\'') &&
                       (is_blank(prev) || prev == '[' || prev == '{' || prev == ',' || prev == ':')) {
                quote_ = c;
            } else if (c == '[' || c == '{') {
                ++flow_depth_;
                if (check_depth(block_depth_ + flow_depth_, line_no, i))
                    return;
            } else if ((c == ']' || c == '}') && flow_depth_ > 0) {
                --flow_depth_;
            }
            prev = c;
            i += step;
        }
    }

    bool check_depth(int depth, int line_no, std::size_t i) {
        if (depth <= max_yaml_nesting_depth)
            return false;
        problems_.push_back({line_no, static_cast<int>(i) + 1,
                             "the YAML is nested more than " + std::to_string(max_yaml_nesting_depth) +
                                 " levels deep here; a rules file needs no more than 5"});
        depth_exceeded_ = true;
        return true;
    }

    std::string_view text_;
    std::vector<text_problem> problems_;
    std::vector<int> indents_;
    int block_depth_ = 0;  // of the last line outside flow collections and quoted scalars
    int flow_depth_ = 0;
    char quote_ = 0;
    bool depth_exceeded_ = false;
};

}  // namespace

std::string_view strip_utf8_bom(std::string_view text) {
    if (text.starts_with("\xEF\xBB\xBF"))
        text.remove_prefix(3);
    return text;
}

std::vector<text_problem> precheck_rules_text(std::string_view text) {
    if (text.size() > max_rules_file_bytes)
        return {{1, 1,
                 "the file is larger than " + std::to_string(max_rules_file_bytes) +
                     " bytes, the most a rules file may hold"}};
    if (auto problems = check_encoding(text); !problems.empty())
        return problems;
    return structure_scanner(text).run();
}

}  // namespace claimguard::rules
