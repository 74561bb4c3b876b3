"""The grammar of legacy claim apps (issue 17 item 4; DESIGN.md section 7).

An *app* is one generated program: a choice in every dimension below (its habits) plus a load
(users x attempts on a small stock, one or several campaigns). `generate(seed, index, enabled)` draws
it with random.Random, so (seed, index, enabled families) always gives the same app; the runner
stores the whole spec in a failure's JSON, so a replay does not depend on this file staying the same.

Families. Every dimension value is a family named "<dimension>.<value>" (carrier.procedure,
write.upsert_replace, ...); a few families are combinations (combo.*), defined by a predicate on the
whole spec. A disabled family is never generated: the generator draws each dimension among its
enabled values, then redraws the app while it matches a disabled combination. KNOWN_OPEN lists the
families that break a promise today (issue 17's table); CI (`--exclude-known-open`) disables them.
Shrink the list as fixes land: a family leaves KNOWN_OPEN when `model_test.py --families FAMILY
--minutes 5` stays green.
"""

import fnmatch
import random

# dimension -> values, in the order the shrinker prefers (the first value is the simplest).
DIMENSIONS = {
    # the app's driver (PyMySQL: pure Python; MySQLdb: libmariadb)
    "driver": ["pymysql", "mysqldb"],
    # how connections are held: one per user; a pool lending one per statement (one per
    # transaction inside a transaction), FIFO or LIFO; reads and writes on two connections
    "conn": ["dedicated", "pool_fifo", "pool_lifo", "rw_split"],
    # what a pool does when a connection comes back (pools only; reset needs PyMySQL, change_user MySQLdb)
    "borrow": ["none", "reset", "change_user"],
    # which sidecar each connection goes through: the app runs as `sidecars` instances, each with its own
    # sidecar (the deployment claimguard is built for: a user's connections and its instance's pool all go
    # through that instance's sidecar); or claimguard as a shared tier, each connection to any sidecar
    "sidecar_pick": ["per_instance", "shared_tier"],
    # transaction style of one claim attempt
    "tx": ["autocommit", "begin", "start_transaction", "autocommit0", "read_then_begin", "savepoint",
           "savepoint_rollback", "xa_commit", "xa_rollback_retry", "per_statement"],
    # how the statements travel: as text, SQL-level PREPARE/EXECUTE USING @vars, one CALL of a stored
    # procedure doing the whole claim, or stock reads and writes through an updatable view; or the write
    # and the claim INSERT in one query of several statements (MyBatis <foreach> with allowMultiQueries)
    "carrier": ["text", "sql_prepare", "procedure", "view", "multi_statement"],
    # the read before the write
    "read": ["plain", "for_update", "share", "star", "none"],
    # the write of the counter (guard_minus_ge0: MyBatis' `remain - #{num} >= 0`; guard_join: the guarded
    # decrement joined with its campaign, `UPDATE stock s JOIN campaign c ON ... AND s.remain > 0 AND c.active = 1`)
    "write": ["abs_int", "abs_str", "abs_double", "rel", "guard_gt0", "guard_ge1", "version_abs",
              "version_rel", "upsert_odku", "upsert_replace", "guard_minus_ge0", "guard_join"],
    # what the app does with the write's answer: branches on it; or ignores it (0 rows, even an ERR) and
    # inserts the claim anyway, as sloppy legacy code does (the claim must then be refused by claimguard)
    "write_answer": ["checked", "ignored"],
    # the claim row's INSERT
    "claim": ["insert", "insert_ignore", "insert_odku", "replace", "no_columns", "insert_set", "insert_returning"],
    # default database and table names: incident + plain names; incident + qualified names;
    # another default database + qualified; no default database + qualified
    "schema": ["default", "qualified_same", "other_db", "no_db"],
    # the key: BIGINT literal, BIGINT as a quoted string, a VARCHAR key written the same everywhere,
    # a VARCHAR key (case-insensitive collation) written in another case / with a trailing space in the claim
    "key": ["int", "quoted", "string", "string_case"],
    # decrement then insert; insert then decrement (in a transaction only)
    "order": ["decrement_first", "insert_first"],
    # the app's client faults: none; it vanishes (socket shut, no COM_QUIT) between statements
    "fault": ["none", "vanish"],
    # users claim once; users click twice (a second claim after success: the duplicate path)
    "repeat": ["once", "double_click"],
    # the session's sql_mode: the server's default; or each connection adds ANSI_QUOTES with
    # SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES') (again after a pool's reset / change user)
    # and the app writes its table and key names in double quotes ("coupon_stock", "campaign_id")
    "sql_mode": ["default", "ansi_quotes_session"],
    # the rule's options in the rules file the app runs under
    "opt_read_cache": ["off", "on"],
    "opt_admission": ["off", "on"],
    "opt_defer_decrement": ["off", "on"],
    # group_update (coalesced autocommit takes of one key); it needs admission, which the rules then get
    # whatever opt_admission says
    "opt_group_update": ["off", "on"],
    # reserve (each sidecar takes stock in blocks on its own connection and serves the takes of transactions
    # from them); the rules then name no version column (reserve cannot count takes the row never sees), so it
    # goes with writes that touch none: not the version writes, not the upserts (they write the version column)
    "opt_reserve": ["off", "on"],
    "opt_unmodeled": ["refuse", "forward"],
    # after a claim, some users cancel it (a refund): DELETE the claim row, then give the unit back themselves
    # (remain = remain + 1) or not; the claim rule's on_cancel
    "cancel": ["none", "delete_then_restock", "delete_only"],
    "opt_on_cancel": ["keep_stock", "return_stock"],
    # which rows the cancellation's DELETE names: the claim's user and key; or, as an ORM deletes a row it
    # loaded, the claim row's id read just before (SELECT id ...; DELETE ... WHERE id = ?)
    "cancel_where": ["key", "row_id"],
    # who decrements the stock: the app's write (above); or a trigger on the claim table, the app only inserting
    # the claim row (the claim rule then says decremented_by_trigger: true). The trigger is guarded with a
    # SIGNAL (correct directly: the INSERT fails after the last unit), guarded without one (the row goes in,
    # nothing is taken: over-issues directly), or unguarded (remain goes below 0 directly). Each trigger is on
    # a claim table of its own (coupon_order_t<value>, consuming coupon_stock).
    "trigger": ["none", "guarded_signal", "guarded_quiet", "unguarded"],
    # the claim as one INSERT ... SELECT from the stock row (`INSERT INTO coupon_order (user_id, campaign_id)
    # SELECT ?, campaign_id FROM coupon_stock WHERE campaign_id = ? AND remain > 0`), then, if a row went in,
    # the counter recomputed from the claims (`SET remain = <stock> - (SELECT COUNT(*) FROM coupon_order WHERE
    # campaign_id = ?)`): the app writes no decrement (the read, write, claim and order dimensions are not
    # used). In autocommit on the user's own connection (racy directly: two users both see remain > 0), or in
    # a transaction after SELECT ... FOR UPDATE of the stock row (correct directly).
    # autocommit_decrement: the app follows its INSERT ... SELECT claim with its own remain = remain - 1
    "claim_select": ["none", "autocommit", "for_update", "autocommit_decrement"],
}

# relative weights of some values (default 1): most apps run without faults and claim once
WEIGHTS = {("trigger", "none"): 15, ("claim_select", "none"): 15, ("write_answer", "checked"): 3, ("fault", "none"): 3, ("repeat", "once"): 2, ("schema", "default"): 2, ("key", "int"): 2}

TX_STYLES_WITH_TRANSACTION = {"begin", "start_transaction", "autocommit0", "read_then_begin", "savepoint",
                              "savepoint_rollback", "xa_commit", "xa_rollback_retry"}
ABSOLUTE_WRITES = {"abs_int", "abs_str", "abs_double", "version_abs", "upsert_odku", "upsert_replace"}
VERSION_WRITES = {"version_abs", "version_rel"}
GUARDED_WRITES = {"guard_gt0", "guard_ge1", "guard_minus_ge0", "guard_join"}
RELATIVE_WRITES = {"rel"} | GUARDED_WRITES  # need no value read before them
UPSERT_WRITES = {"upsert_odku", "upsert_replace"}
WRITES_OF_THE_VERSION = VERSION_WRITES | UPSERT_WRITES  # not with opt_reserve


def _hot_options_locking_read(s):
    return (s["opt_read_cache"] == "on" and s["opt_admission"] == "on" and s["opt_defer_decrement"] == "on"
            and s["read"] in ("share", "for_update") and s["tx"] in TX_STYLES_WITH_TRANSACTION)


def _version_with_defer(s):
    return s["write"] in VERSION_WRITES and s["opt_defer_decrement"] == "on"


def _xa_rollback_after_claim(s):
    # an XA branch that may roll back after its claim INSERT went in: the claim before the decrement, or
    # the take deferred to XA END (where a deadlock then ends the branch)
    return s["tx"] in ("xa_commit", "xa_rollback_retry") and (
        s["order"] == "insert_first" or s["opt_defer_decrement"] == "on")


def _pool_lends_per_statement(s):
    return s["conn"] in ("pool_fifo", "pool_lifo") and s["tx"] in ("autocommit", "per_statement")


def _admission_share_lock(s):
    return s["opt_admission"] == "on" and s["read"] == "share" and s["tx"] in TX_STYLES_WITH_TRANSACTION \
        and s["tx"] != "read_then_begin"


# Combinations that are families of their own (predicate on the spec).
COMBOS = {
    "combo.hot_options_locking_read": (
        "read_cache + admission + defer_decrement on, a locking read in a transaction", _hot_options_locking_read),
    "combo.version_defer": ("an optimistic version write with defer_decrement on", _version_with_defer),
    "combo.admission_share_lock": ("admission on, LOCK IN SHARE MODE read in the transaction that writes",
                                   _admission_share_lock),
    "combo.pool_per_statement_autocommit": ("a pool lending a connection per statement, outside transactions",
                                            _pool_lends_per_statement),
    "combo.xa_rollback_after_claim": ("XA with the claim before the decrement, or with defer_decrement on",
                                      _xa_rollback_after_claim),
}

# family -> why it is excluded from CI (issue 17's table row, or what this test observed). The lead
# shrinks this list as fixes land.
KNOWN_OPEN = {
    "sidecar_pick.shared_tier": "not claimguard's deployment: the take ledger is per sidecar, so a pool spread "
                                "over sidecars claims through another sidecar than it took through: the claim is "
                                "answered sold out while stock is left and the take leaks (seed 5042 app 0)",
}


def all_families():
    fams = [f"{d}.{v}" for d, vals in DIMENSIONS.items() for v in vals]
    return fams + list(COMBOS)


def families_of(spec):
    """Every family an app belongs to (its dimension values and the combinations it matches)."""
    fams = [f"{d}.{spec[d]}" for d in DIMENSIONS]
    return fams + [name for name, (_, pred) in COMBOS.items() if pred(spec)]


def resolve_families(expr, exclude_known_open):
    """The enabled families from an expression: comma-separated globs, '-' in front disables
    ('all,-carrier.*,carrier.text'). Empty means all. Applied left to right."""
    fams = all_families()
    enabled = set(fams)
    if expr:
        parts = [p.strip() for p in expr.split(",") if p.strip()]
        if parts and not parts[0].startswith("-") and parts[0] != "all":
            # a list of families to *add* to the baseline (the first value of each dimension + KNOWN_OPEN off)
            enabled = set(fams) - set(KNOWN_OPEN)
        for p in parts:
            if p == "all":
                enabled = set(fams)
                continue
            neg = p.startswith("-")
            pat = p[1:] if neg else p
            hit = fnmatch.filter(fams, pat)
            if not hit:
                raise ValueError(f"no family matches {pat!r}; families: {', '.join(fams)}")
            enabled = (enabled - set(hit)) if neg else (enabled | set(hit))
        if exclude_known_open:
            enabled -= set(KNOWN_OPEN)
    elif exclude_known_open:
        enabled -= set(KNOWN_OPEN)
    # every dimension keeps at least its first value
    for d, vals in DIMENSIONS.items():
        if not any(f"{d}.{v}" in enabled for v in vals):
            enabled.add(f"{d}.{vals[0]}")
    return enabled


def valid(spec):
    """The dependencies between dimensions; an invalid combination is never generated."""
    s = spec
    if s["conn"] not in ("pool_fifo", "pool_lifo") and s["borrow"] != "none":
        return False
    if s["borrow"] == "reset" and s["driver"] != "pymysql":
        return False  # MySQLdb 1.4 exposes no mysql_reset_connection
    if s["borrow"] == "change_user" and s["driver"] != "mysqldb":
        return False  # PyMySQL exposes no COM_CHANGE_USER
    if s["order"] == "insert_first" and s["tx"] not in TX_STYLES_WITH_TRANSACTION:
        return False
    if s["read"] == "none" and s["write"] not in RELATIVE_WRITES:
        return False  # an absolute or version write needs the value it read
    if s["read"] == "none" and s["tx"] == "read_then_begin":
        return False
    if s["carrier"] == "procedure":
        # the procedure does the whole claim; only the transaction around the CALL is the app's
        if s["tx"] not in ("autocommit", "begin") or s["order"] != "decrement_first":
            return False
        if s["key"] not in ("int", "quoted") or s["read"] != "plain" or s["write"] != "abs_int" \
                or s["claim"] != "insert":
            return False
    if s["carrier"] == "view" and (s["key"] not in ("int", "quoted") or s["write"] in UPSERT_WRITES
                                   or s["write"] == "guard_join"):
        return False
    if s["carrier"] == "multi_statement":
        # "UPDATE ...; INSERT ..." in one query: the server stops only at an ERR, so the app cannot branch on
        # the write's rows; writes that claimguard answers with an ERR when they take nothing (absolute and
        # relative), the decrement first, one transaction around the query at most.
        if s["order"] != "decrement_first" or s["write_answer"] != "checked" \
                or s["write"] not in ("abs_int", "abs_str", "abs_double", "rel") \
                or s["tx"] not in ("autocommit", "begin", "start_transaction", "autocommit0") \
                or s["claim"] not in ("insert", "insert_ignore", "insert_set"):
            return False
    if s["key"] in ("string", "string_case") and s["write"] in UPSERT_WRITES:
        return False
    if s["cancel"] == "delete_only" and s["opt_on_cancel"] != "return_stock":
        return False  # the app never gives the unit back: only return_stock keeps the stock whole
    if s["claim_select"] != "none":
        # as text on the integer-keyed tables, no trigger, no refund; the recompute right after the claim on
        # the same connection (the next statement in autocommit, in the claim's transaction otherwise)
        if s["carrier"] != "text" or s["key"] not in ("int", "quoted") or s["trigger"] != "none" \
                or s["cancel"] != "none":
            return False
        if s["claim_select"] in ("autocommit", "autocommit_decrement") and (s["tx"] != "autocommit"
                                                                           or s["conn"] != "dedicated"):
            return False
        if s["claim_select"] == "for_update" and (s["tx"] not in ("begin", "start_transaction")
                                                  or s["conn"] == "rw_split"):
            return False
    if s["opt_reserve"] == "on" and (s["write"] in WRITES_OF_THE_VERSION or s["claim_select"] != "none"):
        # reserve's rules name no version column; a counter recomputed from the claims would overwrite the units
        # the sidecars hold (with reserve the counter is the stock not reserved): not modelled together yet
        return False
    if s["trigger"] != "none":
        # the app only inserts the claim, as text (SQL-level PREPARE of a protected table gets the unmodeled
        # policy whatever the table), on the integer-keyed table: the rule reads only a one-row plain INSERT
        # as the trigger's take (docs/RULES.md); the write's dimensions are not used (the trigger is the write)
        if s["carrier"] != "text" or s["key"] not in ("int", "quoted") \
                or s["claim"] not in ("insert", "no_columns", "insert_set"):
            return False
    return True


def repair(spec, enabled):
    """Fixes the simple dependencies in place instead of redrawing the whole app (redrawing would make
    the values with fewer valid partners rare: MySQLdb, pools without a reset, ...)."""
    s = spec
    if s["borrow"] != "none" and "borrow.none" in enabled:
        if s["conn"] not in ("pool_fifo", "pool_lifo") or (s["borrow"] == "reset" and s["driver"] != "pymysql") \
                or (s["borrow"] == "change_user" and s["driver"] != "mysqldb"):
            s["borrow"] = "none"
    if s["order"] == "insert_first" and s["tx"] not in TX_STYLES_WITH_TRANSACTION \
            and "order.decrement_first" in enabled:
        s["order"] = "decrement_first"
    if s["read"] == "none" and (s["write"] not in RELATIVE_WRITES or s["tx"] == "read_then_begin") \
            and "read.plain" in enabled:
        s["read"] = "plain"
    if s["cancel"] == "delete_only" and "opt_on_cancel.return_stock" in enabled:
        s["opt_on_cancel"] = "return_stock"
    if s["claim_select"] != "none":
        fixes = {"carrier": "text", "trigger": "none", "cancel": "none"}
        if s["key"] not in ("int", "quoted"):
            fixes["key"] = "int"
        if s["claim_select"] in ("autocommit", "autocommit_decrement"):
            fixes.update(tx="autocommit", conn="dedicated", borrow="none")
        elif s["tx"] not in ("begin", "start_transaction"):
            fixes["tx"] = "begin"
        for d, v in fixes.items():
            if s[d] != v and f"{d}.{v}" in enabled:
                s[d] = v
        if s["claim_select"] == "for_update" and s["conn"] == "rw_split" and "conn.dedicated" in enabled:
            s["conn"] = "dedicated"
    # (reserve is turned off rather than the app redrawn: the CI seeds' apps stay the same)
    if s["opt_reserve"] == "on" and (s["write"] in WRITES_OF_THE_VERSION or s["claim_select"] != "none") \
            and "opt_reserve.off" in enabled:
        s["opt_reserve"] = "off"
    if s["trigger"] != "none":
        if s["carrier"] != "text" and "carrier.text" in enabled:
            s["carrier"] = "text"
        if s["key"] not in ("int", "quoted") and "key.int" in enabled:
            s["key"] = "int"
        if s["claim"] not in ("insert", "no_columns", "insert_set") and "claim.insert" in enabled:
            s["claim"] = "insert"


def correct_directly(spec):
    """True when the app never over-issues against MariaDB directly (with the unique index): its write
    is guarded, or optimistic with a version, or it reads under FOR UPDATE in the transaction that
    writes. The racy ones (a literal from a plain read, an unguarded relative write) are what
    claimguard exists for; they are checked for every promise except selling as much as directly."""
    s = spec
    if s["claim_select"] != "none":
        return s["claim_select"] == "for_update"  # the app's write dimensions are not used
    if s["trigger"] != "none":
        return s["trigger"] == "guarded_signal"  # the app's write dimensions are not used
    if s["carrier"] == "procedure" or s["write"] in UPSERT_WRITES or s["write_answer"] == "ignored":
        return False
    if s["write"] in GUARDED_WRITES or s["write"] in VERSION_WRITES:
        return True
    return (s["read"] == "for_update" and s["tx"] in TX_STYLES_WITH_TRANSACTION
            and s["tx"] != "read_then_begin")


# Dimensions added after the CI seeds were chosen draw from a generator of their own, so each CI seed's
# apps keep every habit and load they had, and gain only the new dimension's value.
OWN_GENERATOR = {"sql_mode", "trigger", "cancel_where", "opt_group_update", "claim_select", "opt_reserve"}


def generate(seed, index, enabled):
    """One app: deterministic in (seed, index, enabled)."""
    rng = random.Random(f"claimguard-model:{seed}:{index}")
    # one generator per such dimension (sql_mode keeps the one it had), so that adding one changes no other's draws
    own = {d: random.Random(f"claimguard-model:{seed}:{index}:own" + ("" if d == "sql_mode" else f":{d}"))
           for d in OWN_GENERATOR}
    for _ in range(2000):
        spec = {}
        for d, vals in DIMENSIONS.items():
            choices = [v for v in vals if f"{d}.{v}" in enabled]
            draw = own.get(d, rng)
            spec[d] = draw.choices(choices, weights=[WEIGHTS.get((d, v), 1) for v in choices])[0]
        # claim_select changes an app the other dimensions drew (it needs text, its own transaction styles, ...):
        # the app is drawn without it first, so that one it does not fit stays the app it was before the
        # dimension existed (no redraw), and CI seeds keep their apps.
        select = spec["claim_select"]
        if "claim_select.none" in enabled:
            spec["claim_select"] = "none"
        repair(spec, enabled)
        if not valid(spec):
            continue
        if any(name not in enabled and pred(spec) for name, (_, pred) in COMBOS.items()):
            continue
        if select != spec["claim_select"]:
            selected = dict(spec, claim_select=select)
            repair(selected, enabled)
            if valid(selected) and not any(name not in enabled and pred(selected)
                                           for name, (_, pred) in COMBOS.items()):
                spec = selected
        break
    else:
        raise RuntimeError(f"seed {seed} app {index}: no valid app within the enabled families")
    ncamp = rng.choice([1, 1, 1, 2, 3])
    spec["stocks"] = [rng.randint(5, 30) for _ in range(ncamp)]
    total = sum(spec["stocks"])
    # demand usually above supply (the sale sells out), sometimes below (stock must stay)
    spec["users"] = max(2, min(24, int(total * rng.choice([0.5, 1.0, 1.5, 2.0, 2.5]) / max(1, ncamp ** 0.5))))
    spec["attempts"] = rng.randint(1, 3)           # campaigns a user goes for (with repetition)
    spec["retries"] = rng.randint(1, 4)            # retries after a retryable error / a conflict
    spec["sidecars"] = rng.randint(1, 8)           # capped by the run's --sidecars
    spec["pool_size"] = rng.randint(2, 6)
    spec["fault_p"] = rng.choice([0.05, 0.1, 0.2]) if spec["fault"] == "vanish" else 0.0
    spec["think_ms"] = rng.choice([0, 0, 1, 3])    # the app's own work between statements
    spec["user_seed"] = rng.randrange(1 << 30)
    spec["seed"] = seed
    spec["index"] = index
    return spec


def normalize(spec):
    """A spec saved by an older version of this file, made runnable: dimensions added since take their first
    (simplest) value; renamed values are mapped."""
    s = dict(spec)
    if s.get("sidecar_pick") in ("round_robin", "random"):
        s["sidecar_pick"] = "shared_tier"
    elif s.get("sidecar_pick") == "one":
        s["sidecar_pick"] = "per_instance"
    for d, vals in DIMENSIONS.items():
        if s.get(d) not in vals:
            s[d] = vals[0]
    return s


def options_key(spec):
    """The rules file an app needs: apps with the same key run under the same rules (one reload)."""
    return (spec["opt_read_cache"], spec["opt_admission"], spec["opt_defer_decrement"], spec["opt_unmodeled"],
            spec["opt_on_cancel"], spec["opt_group_update"], spec["opt_reserve"])


def describe(spec):
    keys = [d for d in DIMENSIONS]
    habits = " ".join(f"{d}={spec[d]}" for d in keys)
    return (f"seed {spec['seed']} app {spec['index']}: {habits} stocks={spec['stocks']} users={spec['users']} "
            f"attempts={spec['attempts']} retries={spec['retries']} sidecars={spec['sidecars']}"
            + (f" pool={spec['pool_size']}" if spec["conn"].startswith("pool") else "")
            + (f" fault_p={spec['fault_p']}" if spec["fault"] != "none" else ""))
