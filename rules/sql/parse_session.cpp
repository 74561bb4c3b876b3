// Transaction control, SET of session variables and USE: what changes how later statements read.
#include "rules/sql/parser_detail.hpp"

namespace claimguard::rules::sql::detail {
namespace {

// [AND [NO] CHAIN] [[NO] RELEASE] of COMMIT and ROLLBACK.
[[nodiscard]] bool parse_completion(cursor& c, transaction_statement& out) {
    if (c.accept_word("AND")) {
        out.chain = c.accept_word("NO") ? tristate::no : tristate::yes;
        if (!c.accept_word("CHAIN")) return false;
    }
    if (c.is_word("NO") && c.is_word("RELEASE", 1)) {
        c.pos += 2;
        out.release = tristate::no;
    } else if (c.accept_word("RELEASE")) {
        out.release = tristate::yes;
    }
    return true;
}

[[nodiscard]] bool parse_savepoint_name(cursor& c, transaction_statement& out) {
    if (!c.is_kind(token_kind::word) && !c.is_kind(token_kind::quoted_ident)) return false;
    out.savepoint = c.pos++;
    return true;
}

[[nodiscard]] bool scope_word(cursor& c, variable_scope& scope) {
    if (c.accept_word("SESSION") || c.accept_word("LOCAL")) scope = variable_scope::session;
    else if (c.accept_word("GLOBAL")) scope = variable_scope::global;
    else if (c.accept_word("PERSIST")) scope = variable_scope::persist;
    else if (c.accept_word("PERSIST_ONLY")) scope = variable_scope::persist_only;
    else return false;
    return true;
}

[[nodiscard]] bool scope_name(std::string_view w, variable_scope& scope) {
    if (iequals(w, "SESSION") || iequals(w, "LOCAL")) scope = variable_scope::session;
    else if (iequals(w, "GLOBAL")) scope = variable_scope::global;
    else if (iequals(w, "PERSIST")) scope = variable_scope::persist;
    else if (iequals(w, "PERSIST_ONLY")) scope = variable_scope::persist_only;
    else return false;
    return true;
}

[[nodiscard]] bool at_set_item_end(const cursor& c) { return c.at_statement_end() || c.is_punct(","); }

// A character set or collation name: a word (reserved words like BINARY included), a quoted
// name or a string.
[[nodiscard]] bool take_charset_name(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    if (c.accept_word("DEFAULT")) {
        out.kind = operand_kind::default_;
    } else if (c.is_kind(token_kind::word) || c.is_kind(token_kind::quoted_ident)) {
        out.kind = operand_kind::word;
        out.column.name = c.pos++;
        out.column.span = {start, c.pos};
    } else if (c.is_kind(token_kind::string)) {
        out.kind = operand_kind::literal;
        out.value_token = c.pos++;
    } else {
        return false;
    }
    out.span = {start, c.pos};
    return true;
}

[[nodiscard]] bool parse_set_value(cursor& c, operand& out) {
    const std::uint32_t start = c.pos;
    // ON, OFF, utf8mb4, ...: a bare word (even a reserved one) standing alone.
    if (c.is_kind(token_kind::word) && !c.is_word("DEFAULT") && !c.is_word("NULL") && !c.is_word("TRUE") &&
        !c.is_word("FALSE")) {
        ++c.pos;
        if (at_set_item_end(c)) {
            out = operand{};
            out.kind = operand_kind::word;
            out.column.name = start;
            out.column.span = {start, c.pos};
            out.span = {start, c.pos};
            return true;
        }
        c.pos = start;
    }
    return parse_expression(c, out) && at_set_item_end(c);
}

[[nodiscard]] bool parse_set_item(cursor& c, set_item& item) {
    item = set_item{};
    const std::uint32_t start = c.pos;
    if (c.accept_word("NAMES")) {
        item.target = set_target::names;
        if (!take_charset_name(c, item.value)) return false;
        if (c.accept_word("COLLATE")) {
            if (!c.is_kind(token_kind::word) && !c.is_kind(token_kind::quoted_ident) && !c.is_kind(token_kind::string))
                return false;
            item.collation = c.pos++;
        }
    } else if ((c.is_word("CHARACTER") && c.is_word("SET", 1)) || c.is_word("CHARSET")) {
        c.pos += c.is_word("CHARSET") ? 1 : 2;
        item.target = set_target::character_set;
        if (!take_charset_name(c, item.value)) return false;
    } else {
        item.target = set_target::variable;
        if (c.is_kind(token_kind::user_var)) {
            item.scope = variable_scope::user;
            item.name_token = c.pos;
            item.name = c.text().substr(1);
            ++c.pos;
        } else if (c.is_kind(token_kind::system_var)) {
            const std::string_view first = c.text().substr(2);
            variable_scope scope = variable_scope::session;
            if (c.is_punct(".", 1) && scope_name(first, scope) &&
                (c.is_kind(token_kind::word, 2) || c.is_kind(token_kind::quoted_ident, 2))) {
                item.scope = scope;
                item.name_token = c.pos + 2;
                item.name = c.text(2);
                c.pos += 3;
            } else {
                item.name_token = c.pos;
                item.name = first;
                ++c.pos;
            }
        } else {
            if (scope_word(c, item.scope) && c.is_word("TRANSACTION")) return false;
            if (c.is_word("TRANSACTION") || c.is_word("PASSWORD") || c.is_word("ROLE") || c.is_word("DEFAULT") ||
                c.is_word("RESOURCE"))
                return false;
            if (!c.is_kind(token_kind::word) && !c.is_kind(token_kind::quoted_ident)) return false;
            item.name_token = c.pos;
            item.name = c.text();
            ++c.pos;
        }
        if (!c.accept_punct("=") && !c.accept_punct(":=")) return false;
        if (!parse_set_value(c, item.value)) return false;
    }
    item.span = {start, c.pos};
    return true;
}

}  // namespace

bool parse_transaction(cursor& c, transaction_statement& out) {
    if (c.accept_word("BEGIN")) {
        out.kind = transaction_kind::begin;
        c.accept_word("WORK");
        return c.at_statement_end();
    }
    if (c.accept_word("START")) {
        if (!c.accept_word("TRANSACTION")) return false;
        out.kind = transaction_kind::begin;
        if (c.at_statement_end()) return true;
        do {
            if (c.accept_word("WITH")) {
                if (!c.accept_word("CONSISTENT") || !c.accept_word("SNAPSHOT")) return false;
                out.consistent_snapshot = true;
            } else if (c.accept_word("READ")) {
                if (c.accept_word("ONLY")) out.read_only = true;
                else if (c.accept_word("WRITE")) out.read_write = true;
                else return false;
            } else {
                return false;
            }
        } while (c.accept_punct(","));
        return c.at_statement_end();
    }
    if (c.accept_word("COMMIT")) {
        out.kind = transaction_kind::commit;
        c.accept_word("WORK");
        return parse_completion(c, out) && c.at_statement_end();
    }
    if (c.accept_word("ROLLBACK")) {
        c.accept_word("WORK");
        if (c.accept_word("TO")) {
            out.kind = transaction_kind::rollback_to_savepoint;
            c.accept_word("SAVEPOINT");
            return parse_savepoint_name(c, out) && c.at_statement_end();
        }
        out.kind = transaction_kind::rollback;
        return parse_completion(c, out) && c.at_statement_end();
    }
    if (c.accept_word("SAVEPOINT")) {
        out.kind = transaction_kind::savepoint;
        return parse_savepoint_name(c, out) && c.at_statement_end();
    }
    if (c.accept_word("RELEASE")) {
        out.kind = transaction_kind::release_savepoint;
        return c.accept_word("SAVEPOINT") && parse_savepoint_name(c, out) && c.at_statement_end();
    }
    return false;
}

bool parse_set(cursor& c, set_statement& out) {
    ++c.pos;  // SET
    do {
        if (!parse_set_item(c, out.items.emplace_back())) return false;
    } while (c.accept_punct(","));
    return c.at_statement_end();
}

bool parse_use(cursor& c, use_statement& out) {
    ++c.pos;  // USE
    if (!c.is_kind(token_kind::word) && !c.is_kind(token_kind::quoted_ident)) return false;
    out.database = c.pos++;
    return c.at_statement_end();
}

}  // namespace claimguard::rules::sql::detail
