// Internal to the claim operation's files (claim_operation.cpp, claim_inserts.cpp):
// the server codes and status questions they share, and the stock key a decision's fact names.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>

#include "decide.hpp"
#include "proxy/protocol/capabilities.hpp"

namespace claimguard::engine::detail {

inline constexpr std::uint16_t er_dup_entry = 1062;
inline constexpr std::uint16_t er_lock_wait_timeout = 1205;
// A statement that reads the session's status flags and changes nothing, not even the diagnostics
// area (the app's SHOW WARNINGS still sees its error).
inline constexpr std::string_view status_question = "SHOW COUNT(*) WARNINGS";

// Whether what the statement does commits only with a later COMMIT: inside an open transaction,
// or with autocommit off (ORMs such as Hibernate and SQLAlchemy run so: every statement opens one).
inline bool in_transaction(std::uint16_t status) {
    return (status & protocol::status::in_trans) != 0 || (status & protocol::status::autocommit) == 0;
}

inline const rules::match::small_vector<rules::match::value_ref, 2>* stock_key_of(const decision& d) {
    namespace match = rules::match;
    if (d.fact == nullptr) return nullptr;
    if (const auto* w = std::get_if<match::counter_write>(d.fact)) return &w->key;
    if (const auto* c = std::get_if<match::counter_change>(d.fact)) return &c->key;
    if (const auto* i = std::get_if<match::claim_insert>(d.fact))
        return i->rows.empty() ? nullptr : &i->rows.front().stock_key;
    if (const auto* c = std::get_if<match::claim_delete>(d.fact)) return c->stock_key_pinned ? &c->stock_key : nullptr;
    return nullptr;
}

}  // namespace claimguard::engine::detail
