// libFuzzer: lexer, parser, matcher and rewriter on arbitrary bytes, with their invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "rules/match/describe.hpp"
#include "rules/match/matcher.hpp"
#include "rules/match/rewriter.hpp"
#include "rules/sql/lexer.hpp"
#include "rules/sql/parser.hpp"
#include "tests/rules/match/test_rules.hpp"

namespace {

using namespace claimguard::rules;

void require(bool ok) {
    if (!ok) std::abort();
}

// First input byte: charset (low 3 bits), ANSI_QUOTES, NO_BACKSLASH_ESCAPES, MariaDB.
sql::lexer_options options_from(std::uint8_t b) {
    static constexpr sql::charset sets[] = {sql::charset::single_byte, sql::charset::gbk, sql::charset::big5,
                                            sql::charset::sjis,        sql::charset::cp932, sql::charset::gb18030,
                                            sql::charset::single_byte, sql::charset::gbk};
    sql::lexer_options o;
    o.client_charset = sets[b & 7];
    o.ansi_quotes = (b & 8) != 0;
    o.no_backslash_escapes = (b & 16) != 0;
    o.mariadb = (b & 32) != 0;
    o.server_version = (b & 64) != 0 ? 80036 : 0;
    return o;
}

// Tokens tile the input: contiguous, non-empty, within bounds, then `end` at the size.
void check_tiling(std::string_view sql, const sql::lexer_options& o) {
    sql::lexer lx(sql, o);
    std::size_t at = 0;
    for (std::size_t n = 0;; ++n) {
        require(n <= sql.size() + 1);
        const sql::token t = lx.next();
        if (t.kind == sql::token_kind::end) {
            require(t.offset == sql.size() && at == sql.size());
            return;
        }
        require(t.offset == at && t.length > 0 && t.end_offset() <= sql.size());
        at = t.end_offset();
    }
}

void check_spans(const sql::parsed_statement& st) {
    for (const auto& t : st.tokens) require(t.end_offset() <= st.sql.size());
    for (std::size_t i = 1; i < st.tokens.size(); ++i) require(st.tokens[i - 1].end_offset() <= st.tokens[i].offset);
}

// A rewrite must read back as the guarded decrement it was meant to be.
void check_rewrite(const sql::parsed_statement& st, const match::rule_index& index,
                   const match::result<match::rewritten_sql>& r) {
    if (!r) return;
    const auto again = sql::parse(r->sql, st.options);
    require(again.ours());
    require(again.placeholder_count == r->parameters.size());
    for (auto p : r->parameters) require(p < st.placeholder_count);
    const auto m = match::match(again, index);
    bool found = false;
    for (const auto& f : m.facts)
        if (const auto* c = std::get_if<match::counter_change>(&f))
            found = found || (c->guard == match::guard_state::sufficient || c->guard == match::guard_state::unknown);
    require(found);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const rule_set rules = match::test::make_rules();
    static const match::rule_index index(rules);
    if (size == 0) return 0;
    const sql::lexer_options o = options_from(data[0]);
    const std::string_view sql(reinterpret_cast<const char*>(data + 1), size - 1);

    check_tiling(sql, o);
    const auto st = sql::parse(sql, o);
    check_spans(st);
    const auto verdict = index.filter().classify(sql);
    const auto m = match::match(st, index);
    // The pre-filter never hides a statement with facts.
    if (!m.facts.empty()) require(verdict != sql::prefilter_verdict::irrelevant);
    for (const auto& f : m.facts) {
        (void)match::describe_fact(f);
        if (const auto* w = std::get_if<match::counter_write>(&f)) {
            check_rewrite(st, index, match::rewrite_write(st, *w, 1));
        } else if (const auto* c = std::get_if<match::counter_change>(&f)) {
            check_rewrite(st, index, match::rewrite_change(st, *c));
        } else if (const auto* claim = std::get_if<match::claim_insert>(&f)) {
            for (const auto& row : claim->rows)
                if (claim->stock != nullptr) {
                    const auto comp = match::compensation(*claim->stock, row.stock_key);
                    if (comp) require(sql::parse(comp->sql, o).ours());
                }
        }
    }
    return 0;
}
