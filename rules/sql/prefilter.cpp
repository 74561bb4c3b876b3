// Pre-filter: first keyword after comments, then a case-insensitive search for table names.
#include "rules/sql/prefilter.hpp"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
        names_.push_back(std::move(name));
    }
}

namespace {

// ORing 0x20 folds ASCII letters to lower case; other bytes may collide (`@` and a backtick),
// which only lets through candidates that the exact check below then rejects.
constexpr char fold_bit = 0x20;

// `name` (lower case) starts at i as a whole token: the byte before it cannot be part of a word.
[[nodiscard]] bool whole_name_at(const char* p, std::size_t i, std::string_view name) noexcept {
    if (i > 0 && is_ident_byte(p[i - 1])) return false;
    for (std::size_t k = 0; k < name.size(); ++k)
        if (ascii_lower(p[i + k]) != name[k]) return false;
    return true;
}

// Any start of `name` in p[from, n): first and last bytes filter 16 positions at once
// (SSE2), the survivors are checked exactly.
[[nodiscard]] bool find_name(const char* p, std::size_t from, std::size_t n, std::string_view name) noexcept {
    const std::size_t len = name.size();
    if (n < len || from > n - len) return false;
    const char first = static_cast<char>(name.front() | fold_bit);
    const char last = static_cast<char>(name.back() | fold_bit);
    std::size_t i = from;
#if defined(__SSE2__)
    constexpr std::size_t lanes = 16;
    const __m128i vfirst = _mm_set1_epi8(first);
    const __m128i vlast = _mm_set1_epi8(last);
    const __m128i vfold = _mm_set1_epi8(fold_bit);
    for (; i + len - 1 + lanes <= n; i += lanes) {
        const __m128i a = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), vfold);
        const __m128i b = _mm_or_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i + len - 1)), vfold);
        auto mask = static_cast<unsigned>(_mm_movemask_epi8(_mm_and_si128(_mm_cmpeq_epi8(a, vfirst), _mm_cmpeq_epi8(b, vlast))));
        while (mask != 0) {
            const auto bit = static_cast<std::size_t>(__builtin_ctz(mask));
            if (whole_name_at(p, i + bit, name)) return true;
            mask &= mask - 1;
        }
    }
#endif
    for (; i + len <= n; ++i)
        if (static_cast<char>(p[i] | fold_bit) == first && static_cast<char>(p[i + len - 1] | fold_bit) == last &&
            whole_name_at(p, i, name))
            return true;
    return false;
}

}  // namespace

bool prefilter::mentions_table(std::string_view sql, std::size_t from) const noexcept {
    if (always_candidate_) return true;
    for (const auto& name : names_)
        if (find_name(sql.data(), from, sql.size(), name)) return true;
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
        case 4:
            // LOAD DATA ... INTO TABLE t, DROP TABLE t: writes the engine does not model, which
            // the rule's unmodeled policy must see.
            // CALL p(...): a procedure that reaches a protected table (its name is among the names).
            if (iequals(word, "LOAD") || iequals(word, "DROP") || iequals(word, "CALL"))
                return mentions_table(sql, end) ? prefilter_verdict::candidate : prefilter_verdict::irrelevant;
            break;
        case 5:
            if (iequals(word, "BEGIN") || iequals(word, "START")) return prefilter_verdict::session;
            if (iequals(word, "ALTER"))
                return mentions_table(sql, end) ? prefilter_verdict::candidate : prefilter_verdict::irrelevant;
            break;
        case 6:
            if (iequals(word, "SELECT") || iequals(word, "UPDATE") || iequals(word, "INSERT") || iequals(word, "DELETE") ||
                iequals(word, "RENAME"))
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
            if (iequals(word, "TRUNCATE"))
                return mentions_table(sql, end) ? prefilter_verdict::candidate : prefilter_verdict::irrelevant;
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
