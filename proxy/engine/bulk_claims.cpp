// A bulk execute of a prepared claim INSERT as the claim INSERT of several rows it means.
#include "bulk_claims.hpp"

#include <variant>

namespace claimguard::engine {

namespace match = rules::match;

namespace {

// The value as row `row` of the bulk binds it: a placeholder moves to that row's values.
match::value_ref in_row(match::value_ref v, std::uint16_t params, std::size_t row) {
    if (v.type == match::value_ref::kind::placeholder) v.placeholder_index += static_cast<std::uint32_t>(row * params);
    return v;
}

}  // namespace

std::optional<match::match_result> bulk_claim_facts(const match::match_result& statement_facts, std::uint16_t params,
                                                    std::size_t rows) {
    if (statement_facts.facts.size() != 1 || rows == 0 || rows > max_bulk_claim_rows || params == 0)
        return std::nullopt;
    const auto* ins = std::get_if<match::claim_insert>(&statement_facts.facts.front());
    // REPLACE and ON DUPLICATE KEY UPDATE of several rows are not modelled (multi_row_insert); a bulk of
    // them stays a bulk_execute refusal whatever its row count.
    // An INSERT ... SELECT claim is one row taken for by its own take, then sent as VALUES: not a bulk.
    if (!ins || ins->replace || ins->on_duplicate_update || ins->rows.empty() || ins->from_select) return std::nullopt;
    match::claim_insert all = *ins;
    all.rows.clear();
    all.rows.reserve(ins->rows.size() * rows);
    for (std::size_t b = 0; b < rows; ++b) {
        for (const auto& row : ins->rows) {
            match::claim_row r;
            for (const auto& v : row.idempotency) r.idempotency.push_back(in_row(v, params, b));
            if (row.idempotency_key) r.idempotency_key = in_row(*row.idempotency_key, params, b);
            for (const auto& v : row.stock_key) r.stock_key.push_back(in_row(v, params, b));
            all.rows.push_back(std::move(r));
        }
    }
    match::match_result out;
    out.facts.emplace_back(std::move(all));
    return out;
}

}  // namespace claimguard::engine
