// Every limit the rules loader enforces, in one place (DBA-facing values are documented in docs/RULES.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace claimguard::rules {

// Input size: a rules file is a few kilobytes; anything far larger is a mistake or an attack.
inline constexpr std::size_t max_rules_file_bytes = 1024 * 1024;
inline constexpr std::size_t max_rules_sources = 256;
inline constexpr std::size_t max_rules_per_set = 4096;

// yaml-cpp parses recursively; deeper input than this is refused before it reaches the parser.
// A valid rules file nests 5 levels (top map, rule list, rule, consumes, columns).
inline constexpr int max_yaml_nesting_depth = 64;

// Loading stops adding diagnostics past this many, so hostile input cannot flood the output.
inline constexpr std::size_t max_diagnostics = 100;

// MySQL: identifiers are at most 64 characters; an index holds at most 16 columns.
inline constexpr std::size_t max_identifier_chars = 64;
inline constexpr std::size_t max_index_columns = 16;

inline constexpr std::size_t max_rule_name_chars = 64;

// Answers: the ERR packet's code is 16 bits; 0 is not an error. Codes 2000-2999 belong to
// the client library (e.g. 2013 "Lost connection"): drivers treat them as connection failures.
inline constexpr std::uint32_t min_error_code = 1;
inline constexpr std::uint32_t max_error_code = 65535;
inline constexpr std::uint32_t first_client_error_code = 2000;
inline constexpr std::uint32_t last_client_error_code = 2999;
inline constexpr std::size_t sql_state_length = 5;
inline constexpr std::size_t max_answer_message_bytes = 512;

// Defaults of the answers (documented in docs/RULES.md).
inline constexpr std::uint16_t default_answer_code = 1644;  // ER_SIGNAL_EXCEPTION
inline constexpr const char* default_answer_sql_state = "45000";  // unhandled user-defined exception

// Redis guard.
inline constexpr std::size_t max_key_template_bytes = 512;
inline constexpr std::chrono::milliseconds default_redis_ttl{3000};
inline constexpr std::chrono::milliseconds min_redis_ttl{1};
inline constexpr std::chrono::milliseconds max_redis_ttl{24 * 60 * 60 * 1000};

// Stock rule read_cache: how stale a counter read answered by the sidecar may be.
inline constexpr std::chrono::milliseconds min_read_cache{1};
inline constexpr std::chrono::milliseconds max_read_cache{10 * 1000};
// ... and max_refresh_wait: how long the other reads of a key wait for the one read refreshing it.
inline constexpr std::chrono::milliseconds min_refresh_wait{1};
inline constexpr std::chrono::milliseconds max_refresh_wait{5 * 1000};
// ... and read_cache_sold_out: the longest a sold-out key's refreshes back off to (at least read_cache).
inline constexpr std::chrono::milliseconds max_read_cache_sold_out{60 * 1000};

// Units one claim takes (stock rule `units:`); MySQL user names are at most 128 bytes (MariaDB 80 chars).
inline constexpr std::int64_t max_units_per_claim = 1000000000;
inline constexpr std::size_t max_user_name_bytes = 128;

// Per-key admission (stock rule `admission:`).
inline constexpr std::int64_t max_admission_in_flight = 4096;
inline constexpr std::chrono::milliseconds min_admission_queue_timeout{1};
inline constexpr std::chrono::milliseconds max_admission_queue_timeout{60 * 1000};
inline constexpr std::int64_t default_admission_max_queue = 10000;
inline constexpr std::int64_t max_admission_max_queue = 1000000;

// Coalesced takes (stock rule `group_update:`): takes per UPDATE, and the leader's wait for followers.
inline constexpr std::int64_t max_group_update_batch = 1024;
inline constexpr std::int64_t default_group_update_batch = 32;
inline constexpr std::chrono::milliseconds max_group_update_wait{100};

// Reserved stock (stock rule `reserve:`): units a sidecar takes from the row at once, and how long
// unused ones stay with it before they go back to the row.
inline constexpr std::int64_t max_reserve_block = 1000000;
inline constexpr std::chrono::milliseconds default_reserve_idle{5000};
inline constexpr std::chrono::milliseconds min_reserve_idle{10};
inline constexpr std::chrono::milliseconds max_reserve_idle{60 * 60 * 1000};

// DDL: MySQL index names are at most 64 characters; long ones end in a short hash.
inline constexpr std::size_t max_index_name_chars = 64;
inline constexpr std::size_t index_name_hash_hex_digits = 8;

}  // namespace claimguard::rules
