// Pre-filter: first keyword after comments, then a case-insensitive search for table names.
#include "rules/sql/prefilter.hpp"

#include <algorithm>

#include "rules/sql/text.hpp"

namespace claimguard::rules::sql {
namespace {

[[nodiscard]] bool is_word_byte(char c) noexcept { return is_ident_byte(c); }

// Skips whitespace and plain comments at the start. Returns the offset of the first token,
// or npos when a versioned comment comes first (its content is SQL whose version we do not
// judge here) or a comment is not closed.
[[nodiscard]] std::size_t skip_leading_trivia(std::string_view sql) noexcept {
    std::size_t i = 0;
    const std::size_t n = sql.size();
    while (i < n) {
        const char c = sql[i];
        if (is_space(c)) {
            ++i;
        } else if (c == '#' || (c == '-' && i + 1 < n && sql[i + 1] == '-' &&
                                (i + 2 >= n || is_space_or_control(sql[i + 2])))) {
            while (i < n && sql[i] != '\n') ++i;
        } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
            if (i + 2 < n && (sql[i + 2] == '!' || (sql[i + 2] == 'M' && i + 3 < n && sql[i + 3] == '!')))
                return std::string_view::npos;
            const auto close = sql.find("*/", i + 2);
            if (close == std::string_view::npos) return n;  // the server rejects it
            i = close + 2;
        } else {
            break;
        }
    }
    return i;
}

}  // namespace

prefilter::prefilter(const std::vector<std::string>& table_names) {
    for (const auto& raw : table_names) {
        if (raw.empty()) continue;
        std::string name;
        for (char c : raw) {
            if (static_cast<unsigned char>(c) >= 0x80 || c == '`' || c == '"') always_candidate_ = true;
            name.push_back(ascii_lower(c));
        }
        if (std::find(names_.begin(), names_.end(), name) != names_.end()) continue;
        first_byte_[static_cast<unsigned char>(name[0])] = true;
        shortest_ = names_.empty() ? name.size() : std::min(shortest_, name.size());
        names_.push_back(std::move(name));
    }
}

bool prefilter::mentions_table(std::string_view sql, std::size_t from) const noexcept {
    if (always_candidate_) return true;
    if (names_.empty() || sql.size() < shortest_) return false;
    const char* p = sql.data();
    const std::size_t last = sql.size() - shortest_;
    for (std::size_t i = from; i <= last; ++i) {
        const char c = ascii_lower(p[i]);
        if (!first_byte_[static_cast<unsigned char>(c)]) continue;
        // A table name is a whole token: the byte before it cannot be part of a word.
        if (i > 0 && is_word_byte(p[i - 1])) continue;
        for (const auto& name : names_) {
            if (name[0] != c || sql.size() - i < name.size()) continue;
            std::size_t k = 1;
            while (k < name.size() && ascii_lower(p[i + k]) == name[k]) ++k;
            if (k == name.size()) return true;
        }
    }
    return false;
}

prefilter_verdict prefilter::classify(std::string_view sql) const noexcept {
    const std::size_t start = skip_leading_trivia(sql);
    if (start == std::string_view::npos) return prefilter_verdict::session;
    std::size_t end = start;
    while (end < sql.size() && is_word_byte(sql[end])) ++end;
    const std::string_view word = sql.substr(start, end - start);
    switch (word.size()) {
        case 3:
            if (iequals(word, "SET") || iequals(word, "USE")) return prefilter_verdict::session;
            break;
        case 5:
            if (iequals(word, "BEGIN") || iequals(word, "START")) return prefilter_verdict::session;
            break;
        case 6:
            if (iequals(word, "SELECT") || iequals(word, "UPDATE") || iequals(word, "INSERT"))
                return mentions_table(sql, end) ? prefilter_verdict::candidate : prefilter_verdict::irrelevant;
            if (iequals(word, "COMMIT")) return prefilter_verdict::session;
            break;
        case 7:
            if (iequals(word, "REPLACE"))
                return mentions_table(sql, end) ? prefilter_verdict::candidate : prefilter_verdict::irrelevant;
            if (iequals(word, "RELEASE")) return prefilter_verdict::session;
            break;
        case 8:
            if (iequals(word, "ROLLBACK")) return prefilter_verdict::session;
            break;
        case 9:
            if (iequals(word, "SAVEPOINT")) return prefilter_verdict::session;
            break;
        default:
            break;
    }
    return prefilter_verdict::irrelevant;
}

}  // namespace claimguard::rules::sql
