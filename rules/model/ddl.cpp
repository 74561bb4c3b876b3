// DDL for the claim rules: the UNIQUE indexes that make the database refuse a second claim.
#include "rules/model/ddl.hpp"

#include <algorithm>

#include "rules/model/limits.hpp"
#include "rules/model/text.hpp"

namespace claimguard::rules {
namespace {

std::string quoted_list(const std::vector<std::string>& columns) {
    std::string out;
    for (const auto& c : columns)
        out += (out.empty() ? "" : ", ") + quote_identifier(c);
    return out;
}

std::string plain_list(const std::vector<std::string>& columns) {
    std::string out;
    for (const auto& c : columns)
        out += (out.empty() ? "" : ", ") + printable(c);
    return out;
}

std::string display_table(const table_name& t) {
    return printable(t.schema.empty() ? t.name : t.schema + "." + t.name);
}

std::uint64_t columns_hash(std::string_view table, const std::vector<std::string>& columns) {
    // NUL separates names (it cannot occur in one), so (a_b) and (a, b) hash differently.
    std::uint64_t h = fnv1a64(table);
    for (const auto& c : columns) {
        h = fnv1a64(std::string_view("\0", 1), h);
        h = fnv1a64(c, h);
    }
    return h;
}

std::string hashed_index_name(std::string_view base, std::string_view table, const std::vector<std::string>& columns) {
    const auto keep = max_index_name_chars - 1 - index_name_hash_hex_digits;
    return std::string(utf8_prefix(base, keep)) + "_" +
           to_hex(columns_hash(table, columns), index_name_hash_hex_digits);
}

std::string base_index_name(std::string_view table, const std::vector<std::string>& columns) {
    std::string name = "uq_claimguard_" + std::string(table);
    for (const auto& c : columns)
        name += "_" + c;
    return name;
}

const char* const script_header =
    "--\n"
    "-- Each index lets the database itself refuse a second claim for the same key, whatever\n"
    "-- the proxy or Redis do; claimguard turns the duplicate-key error (1062) into the rule's\n"
    "-- \"already claimed\" answer. Review it, then apply it with your usual schema tooling.\n"
    "--\n"
    "-- Before each ALTER TABLE, run the query above it: a UNIQUE index cannot be added while\n"
    "-- duplicate rows exist (the ALTER fails with error 1062). Merge or delete those rows first.\n"
    "-- ALGORITHM=INPLACE, LOCK=NONE keeps the table readable and writable while the index is\n"
    "-- built, and makes the server refuse the statement rather than lock the table.\n"
    "-- Make the indexed columns NOT NULL: a UNIQUE index never counts rows holding NULL as\n"
    "-- duplicates of each other.\n";

}  // namespace

std::string quote_identifier(std::string_view id) {
    std::string out = "`";
    for (const char c : id) {
        out += c;
        if (c == '`')
            out += '`';
    }
    out += '`';
    return out;
}

std::string quote_table(const table_name& table) {
    return table.schema.empty() ? quote_identifier(table.name)
                                : quote_identifier(table.schema) + "." + quote_identifier(table.name);
}

std::string unique_index_name(std::string_view table, const std::vector<std::string>& columns) {
    const auto base = base_index_name(table, columns);
    return utf8_length(base) <= max_index_name_chars ? base : hashed_index_name(base, table, columns);
}

std::vector<unique_index> required_unique_indexes(const rule_set& rules) {
    std::vector<unique_index> out;
    for (const auto& claim : rules.claims) {
        unique_index business{claim.name, claim.table, claim.idempotency_columns,
                              unique_index_name(claim.table.name, claim.idempotency_columns),
                              unique_index::purpose::idempotency_columns};
        out.push_back(business);
        if (!claim.idempotency_key_column)
            continue;
        const std::vector<std::string> key{*claim.idempotency_key_column};
        auto name = unique_index_name(claim.table.name, key);
        // (a, b) and a column named a_b would share a name; MySQL index names ignore case.
        if (iequals(name, business.name))
            name = hashed_index_name(base_index_name(claim.table.name, key), claim.table.name, key);
        out.push_back({claim.name, claim.table, key, std::move(name), unique_index::purpose::idempotency_key_column});
    }
    return out;
}

std::string duplicates_query(const unique_index& index) {
    const auto cols = quoted_list(index.columns);
    return "SELECT " + cols + ", COUNT(*) AS claims FROM " + quote_table(index.table) + " GROUP BY " + cols +
           " HAVING COUNT(*) > 1;";
}

std::string add_index_statement(const unique_index& index) {
    return "ALTER TABLE " + quote_table(index.table) + " ADD UNIQUE INDEX " + quote_identifier(index.name) + " (" +
           quoted_list(index.columns) + "), ALGORITHM=INPLACE, LOCK=NONE;";
}

std::string render_ddl(const rule_set& rules) {
    std::vector<std::string> files;
    const auto note_file = [&](const source_pos& pos) {
        if (std::find(files.begin(), files.end(), pos.file) == files.end())
            files.push_back(pos.file);
    };
    for (const auto& claim : rules.claims)
        note_file(claim.pos);
    std::string out = "-- claimguard ddl: the UNIQUE indexes that back the claim rules";
    for (std::size_t i = 0; i < files.size(); ++i)
        out += (i == 0 ? " in " : ", ") + printable(files[i]);
    out += ".\n";
    const auto indexes = required_unique_indexes(rules);
    if (indexes.empty())
        return out + "-- The rule set has no claim rules, so there is nothing to create.\n";
    out += script_header;
    if (std::any_of(indexes.begin(), indexes.end(), [](const unique_index& i) { return i.table.schema.empty(); }))
        out += "-- Tables named without a schema are the ones in the current database: run this\n"
               "-- script after USE <the application's database>.\n";
    for (const auto& index : indexes) {
        out += "\n-- Claim rule '" + index.rule + "': at most one row in " + display_table(index.table) + " per ";
        if (index.why == unique_index::purpose::idempotency_columns)
            out += index.columns.size() == 1 ? printable(index.columns.front()) + ", the claim's business key.\n"
                                             : "(" + plain_list(index.columns) + "), the claim's business key.\n";
        else
            out += printable(index.columns.front()) + ", the idempotency key column.\n";
        out += "-- Existing duplicates (this must return no rows before the ALTER TABLE):\n";
        out += "--   " + duplicates_query(index) + "\n";
        out += add_index_statement(index) + "\n";
    }
    return out;
}

}  // namespace claimguard::rules
