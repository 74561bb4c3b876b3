// Binary protocol through claimguard: typed parameters, native result binds, long data, cursors, bulk.
#include "tests/integration/capi/harness.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace claimguard::integration {
namespace {

// Pieces sent with mysql_stmt_send_long_data, and their size: more than one packet each.
constexpr int long_data_chunks = 5;
constexpr std::size_t long_data_chunk_bytes = 300 * 1024;
// Rows per COM_STMT_FETCH for the cursor tests: small, so that a result needs many fetches.
constexpr unsigned long cursor_prefetch_rows = 3;
// Rows in one array (bulk) execution.
constexpr unsigned bulk_rows = 6;
// Buffer for string columns in the native-type fetch (longer values are reported truncated).
constexpr std::size_t native_text_buffer_bytes = 512;

class capi_stmt : public ::testing::TestWithParam<std::string> {};

stmt_ptr prepare(transcript& t, MYSQL* m, std::string_view sql) {
    stmt_ptr s(mysql_stmt_init(m));
    if (mysql_stmt_prepare(s.get(), sql.data(), sql.size()) != 0) {
        record_stmt_error(t, s.get(), fmt::format("prepare {}", sql));
        return s;
    }
    t.add(fmt::format("prepare {}: params={} columns={}", sql, mysql_stmt_param_count(s.get()),
                      mysql_stmt_field_count(s.get())));
    if (result_ptr meta(mysql_stmt_result_metadata(s.get())); meta) {
        record_fields(t, meta.get());
    }
    return s;
}

void execute(transcript& t, MYSQL* m, MYSQL_STMT* s, bool buffered = true) {
    if (mysql_stmt_execute(s) != 0) {
        record_stmt_error(t, s, "execute");
        return;
    }
    record_stmt_results(t, m, s, buffered);
}

std::string describe_time(const MYSQL_TIME& v) {
    return fmt::format("{}{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:06} type={}", v.neg ? "-" : "", v.year, v.month, v.day,
                       v.hour, v.minute, v.second, v.second_part, static_cast<int>(v.time_type));
}

// Fetches with buffers of each column's native C type, as typed applications do.
void record_native_rows(transcript& t, MYSQL_STMT* s) {
    result_ptr meta(mysql_stmt_result_metadata(s));
    if (!meta) {
        t.add("native: no result set");
        return;
    }
    const unsigned n = mysql_num_fields(meta.get());
    const MYSQL_FIELD* fields = mysql_fetch_fields(meta.get());
    struct column {
        long long integer = 0;
        float single = 0;
        double real = 0;
        MYSQL_TIME time{};
        std::array<char, native_text_buffer_bytes> text{};
        unsigned long length = 0;
        my_bool null = 0;
        my_bool error = 0;
    };
    std::vector<column> cols(n);
    std::vector<MYSQL_BIND> binds(n);
    for (unsigned i = 0; i < n; ++i) {
        MYSQL_BIND& b = binds[i];
        b = MYSQL_BIND{};
        b.is_null = &cols[i].null;
        b.length = &cols[i].length;
        b.error = &cols[i].error;
        switch (fields[i].type) {
        case MYSQL_TYPE_TINY: case MYSQL_TYPE_SHORT: case MYSQL_TYPE_INT24: case MYSQL_TYPE_LONG:
        case MYSQL_TYPE_LONGLONG: case MYSQL_TYPE_YEAR:
            b.buffer_type = MYSQL_TYPE_LONGLONG;
            b.buffer = &cols[i].integer;
            b.is_unsigned = (fields[i].flags & UNSIGNED_FLAG) != 0;
            break;
        case MYSQL_TYPE_FLOAT:
            b.buffer_type = MYSQL_TYPE_FLOAT;
            b.buffer = &cols[i].single;
            break;
        case MYSQL_TYPE_DOUBLE:
            b.buffer_type = MYSQL_TYPE_DOUBLE;
            b.buffer = &cols[i].real;
            break;
        case MYSQL_TYPE_DATE: case MYSQL_TYPE_TIME: case MYSQL_TYPE_DATETIME: case MYSQL_TYPE_TIMESTAMP:
            b.buffer_type = fields[i].type;
            b.buffer = &cols[i].time;
            break;
        default:
            b.buffer_type = MYSQL_TYPE_BLOB;
            b.buffer = cols[i].text.data();
            b.buffer_length = cols[i].text.size();
            break;
        }
    }
    if (mysql_stmt_bind_result(s, binds.data()) != 0) {
        record_stmt_error(t, s, "native bind_result");
        return;
    }
    for (std::size_t row = 0;; ++row) {
        const int rc = mysql_stmt_fetch(s);
        if (rc == MYSQL_NO_DATA) {
            t.add(fmt::format("native rows={}", row));
            return;
        }
        if (rc == 1) {
            record_stmt_error(t, s, "native fetch");
            return;
        }
        std::string line = fmt::format("native row {}{}:", row, rc == MYSQL_DATA_TRUNCATED ? " truncated" : "");
        for (unsigned i = 0; i < n; ++i) {
            const MYSQL_BIND& b = binds[i];
            if (cols[i].null) {
                line += " NULL";
            } else if (b.buffer_type == MYSQL_TYPE_LONGLONG) {
                line += b.is_unsigned ? fmt::format(" {}u", static_cast<unsigned long long>(cols[i].integer))
                                      : fmt::format(" {}", cols[i].integer);
            } else if (b.buffer_type == MYSQL_TYPE_FLOAT) {
                line += fmt::format(" {}f", cols[i].single);
            } else if (b.buffer_type == MYSQL_TYPE_DOUBLE) {
                line += fmt::format(" {}d", cols[i].real);
            } else if (b.buffer_type == MYSQL_TYPE_BLOB) {
                line += " " + describe_bytes({cols[i].text.data(), std::min<std::size_t>(cols[i].length, cols[i].text.size())});
            } else {
                line += " " + describe_time(cols[i].time);
            }
        }
        t.add(std::move(line));
    }
}

MYSQL_TIME make_time(enum_mysql_timestamp_type type, unsigned y, unsigned mo, unsigned d, unsigned h, unsigned mi,
                     unsigned sec, unsigned long frac, bool neg = false) {
    MYSQL_TIME v{};
    v.year = y;
    v.month = mo;
    v.day = d;
    v.hour = h;
    v.minute = mi;
    v.second = sec;
    v.second_part = frac;
    v.neg = neg;
    v.time_type = type;
    return v;
}

// One row of typed parameters; each execution rebinds from these fields.
struct typed_params {
    signed char ti = 0;
    short si = 0;
    int i = 0;
    long long bi = 0;
    unsigned long long biu = 0;
    float f = 0;
    double d = 0;
    std::string s;
    std::string blob;
    MYSQL_TIME date{};
    MYSQL_TIME time{};
    MYSQL_TIME datetime{};
    std::string decimal;
    my_bool null_int = 1;
    unsigned long s_len = 0, blob_len = 0, dec_len = 0;
};

constexpr int typed_param_count = 15;
// Capacity reserved for the string parameters, so that re-executions reuse the bound buffers.
constexpr std::size_t typed_param_text_capacity = 4096;

void bind_typed(std::array<MYSQL_BIND, typed_param_count>& b, typed_params& p) {
    b.fill(MYSQL_BIND{});
    b[0].buffer_type = MYSQL_TYPE_TINY; b[0].buffer = &p.ti;
    b[1].buffer_type = MYSQL_TYPE_SHORT; b[1].buffer = &p.si;
    b[2].buffer_type = MYSQL_TYPE_LONG; b[2].buffer = &p.i;
    b[3].buffer_type = MYSQL_TYPE_LONGLONG; b[3].buffer = &p.bi;
    b[4].buffer_type = MYSQL_TYPE_LONGLONG; b[4].buffer = &p.biu; b[4].is_unsigned = 1;
    b[5].buffer_type = MYSQL_TYPE_FLOAT; b[5].buffer = &p.f;
    b[6].buffer_type = MYSQL_TYPE_DOUBLE; b[6].buffer = &p.d;
    p.s_len = p.s.size();
    b[7].buffer_type = MYSQL_TYPE_STRING; b[7].buffer = p.s.data(); b[7].buffer_length = p.s.size(); b[7].length = &p.s_len;
    p.blob_len = p.blob.size();
    b[8].buffer_type = MYSQL_TYPE_BLOB; b[8].buffer = p.blob.data(); b[8].buffer_length = p.blob.size(); b[8].length = &p.blob_len;
    b[9].buffer_type = MYSQL_TYPE_DATE; b[9].buffer = &p.date;
    b[10].buffer_type = MYSQL_TYPE_TIME; b[10].buffer = &p.time;
    b[11].buffer_type = MYSQL_TYPE_DATETIME; b[11].buffer = &p.datetime;
    p.dec_len = p.decimal.size();
    b[12].buffer_type = MYSQL_TYPE_NEWDECIMAL; b[12].buffer = p.decimal.data(); b[12].buffer_length = p.decimal.size(); b[12].length = &p.dec_len;
    b[13].buffer_type = MYSQL_TYPE_LONG; b[13].buffer = &p.i; b[13].is_null = &p.null_int;
    b[14].buffer_type = MYSQL_TYPE_NULL;
}

void typed_params_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_ptypes (id INT PRIMARY KEY AUTO_INCREMENT, ti TINYINT, si SMALLINT, "
                 "i INT, bi BIGINT, biu BIGINT UNSIGNED, f FLOAT, d DOUBLE, s VARCHAR(100) CHARACTER SET utf8mb4, "
                 "bl BLOB, dt DATE, tm TIME(6), dtm DATETIME(6), dc DECIMAL(30,10), n1 INT, n2 VARCHAR(5))");
    auto ins = prepare(t, m.get(),
                       "INSERT INTO it_ptypes (ti,si,i,bi,biu,f,d,s,bl,dt,tm,dtm,dc,n1,n2) "
                       "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    std::array<MYSQL_BIND, typed_param_count> binds{};
    typed_params p;
    p = typed_params{-128, -32768, -2147483647 - 1, -9223372036854775807LL - 1, 18446744073709551615ULL, -1.5e38f,
                     2.2250738585072014e-308, "héllo ☃ 😀", std::string("\0\x01\xff\0", 4),
                     make_time(MYSQL_TIMESTAMP_DATE, 1000, 1, 1, 0, 0, 0, 0),
                     make_time(MYSQL_TIMESTAMP_TIME, 0, 0, 0, 100, 59, 59, 0, true),
                     make_time(MYSQL_TIMESTAMP_DATETIME, 2024, 2, 29, 23, 59, 59, 999999), "-12345678901234567890.0123456789"};
    // mysql_stmt_bind_param copies the binds: later values must live in the same buffers.
    p.s.reserve(typed_param_text_capacity);
    p.blob.reserve(typed_param_text_capacity);
    p.decimal.reserve(typed_param_text_capacity);
    bind_typed(binds, p);
    ASSERT_EQ(mysql_stmt_bind_param(ins.get(), binds.data()), 0) << mysql_stmt_error(ins.get());
    execute(t, m.get(), ins.get());
    // Re-execution without rebinding: the client sends no parameter types this time.
    p.ti = 127; p.si = 32767; p.i = 2147483647; p.bi = 9223372036854775807LL; p.biu = 0; p.f = 0.25f; p.d = -0.0;
    p.s = "second"; p.blob.assign(1000, 'b'); p.date = make_time(MYSQL_TIMESTAMP_DATE, 9999, 12, 31, 0, 0, 0, 0);
    p.time = make_time(MYSQL_TIMESTAMP_TIME, 0, 0, 0, 1, 2, 3, 500000);
    p.datetime = make_time(MYSQL_TIMESTAMP_DATETIME, 1970, 1, 1, 0, 0, 1, 1);
    p.decimal = "0.0000000001";
    p.null_int = 0;
    p.s_len = p.s.size();
    p.blob_len = p.blob.size();
    p.dec_len = p.decimal.size();
    execute(t, m.get(), ins.get());
    // Rebinding sends the types again (new-params-bound flag); an out-of-range value gives an error.
    p.null_int = 1;
    bind_typed(binds, p);
    binds[2].buffer_type = MYSQL_TYPE_LONGLONG;
    long long too_big = 1LL << 40;
    binds[2].buffer = &too_big;
    ASSERT_EQ(mysql_stmt_bind_param(ins.get(), binds.data()), 0);
    execute(t, m.get(), ins.get());
    ins.reset();

    auto sel = prepare(t, m.get(), "SELECT * FROM it_ptypes WHERE id > ? ORDER BY id");
    int min_id = 0;
    MYSQL_BIND pb{};
    pb.buffer_type = MYSQL_TYPE_LONG;
    pb.buffer = &min_id;
    ASSERT_EQ(mysql_stmt_bind_param(sel.get(), &pb), 0);
    execute(t, m.get(), sel.get(), true);
    execute(t, m.get(), sel.get(), false);
    ASSERT_EQ(mysql_stmt_execute(sel.get()), 0) << mysql_stmt_error(sel.get());
    record_native_rows(t, sel.get());
    sel.reset();
    record_query(t, m.get(), "SELECT * FROM it_ptypes ORDER BY id");
}

TEST_P(capi_stmt, typed_parameters_and_results) { expect_transparent(GetParam(), typed_params_scenario); }

void native_types_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    auto s = prepare(t, m.get(),
                     "SELECT CAST(-5 AS INT), 255, 18446744073709551615, 1.5e10, CAST(0.5 AS FLOAT), "
                     "DATE'2001-02-03', TIME'-10:11:12.5', TIMESTAMP'2001-02-03 04:05:06.789', 12.50, "
                     "X'00ff', NULL, 'text', YEAR(DATE'1999-01-01'), CAST(1 AS BINARY), b'101'");
    ASSERT_EQ(mysql_stmt_execute(s.get()), 0) << mysql_stmt_error(s.get());
    record_native_rows(t, s.get());
    execute(t, m.get(), s.get());
}

TEST_P(capi_stmt, native_result_binds) { expect_transparent(GetParam(), native_types_scenario); }

void long_data_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_long (id INT PRIMARY KEY, txt LONGTEXT, bin LONGBLOB)");
    auto s = prepare(t, m.get(), "INSERT INTO it_long VALUES (?, ?, ?)");
    int id = 1;
    std::array<MYSQL_BIND, 3> b{};
    b[0].buffer_type = MYSQL_TYPE_LONG;
    b[0].buffer = &id;
    b[1].buffer_type = MYSQL_TYPE_STRING;
    b[2].buffer_type = MYSQL_TYPE_BLOB;
    ASSERT_EQ(mysql_stmt_bind_param(s.get(), b.data()), 0);
    std::string text;
    std::string bytes;
    for (int c = 0; c < long_data_chunks; ++c) {
        std::string piece(long_data_chunk_bytes, static_cast<char>('a' + c));
        std::string raw(long_data_chunk_bytes, '\0');
        for (std::size_t k = 0; k < raw.size(); ++k) {
            raw[k] = static_cast<char>((k * 31 + static_cast<std::size_t>(c)) & 0xff);
        }
        ASSERT_EQ(mysql_stmt_send_long_data(s.get(), 1, piece.data(), piece.size()), 0) << mysql_stmt_error(s.get());
        ASSERT_EQ(mysql_stmt_send_long_data(s.get(), 2, raw.data(), raw.size()), 0) << mysql_stmt_error(s.get());
        text += piece;
        bytes += raw;
    }
    execute(t, m.get(), s.get());
    // Second execution: long data for one parameter only; the other is bound empty.
    ASSERT_EQ(mysql_stmt_send_long_data(s.get(), 1, "x", 1), 0);
    id = 2;
    execute(t, m.get(), s.get());
    s.reset();
    auto sel = prepare(t, m.get(), "SELECT txt, bin, LENGTH(txt), LENGTH(bin) FROM it_long WHERE id = 1");
    ASSERT_EQ(mysql_stmt_execute(sel.get()), 0) << mysql_stmt_error(sel.get());
    std::vector<char> got_text(text.size() + 1);
    std::vector<char> got_bytes(bytes.size() + 1);
    unsigned long text_len = 0;
    unsigned long bytes_len = 0;
    std::array<MYSQL_BIND, 4> r{};
    long long l1 = 0;
    long long l2 = 0;
    r[0].buffer_type = MYSQL_TYPE_STRING; r[0].buffer = got_text.data(); r[0].buffer_length = got_text.size(); r[0].length = &text_len;
    r[1].buffer_type = MYSQL_TYPE_BLOB; r[1].buffer = got_bytes.data(); r[1].buffer_length = got_bytes.size(); r[1].length = &bytes_len;
    r[2].buffer_type = MYSQL_TYPE_LONGLONG; r[2].buffer = &l1;
    r[3].buffer_type = MYSQL_TYPE_LONGLONG; r[3].buffer = &l2;
    ASSERT_EQ(mysql_stmt_bind_result(sel.get(), r.data()), 0);
    ASSERT_EQ(mysql_stmt_fetch(sel.get()), 0) << mysql_stmt_error(sel.get());
    EXPECT_EQ(std::string_view(got_text.data(), text_len), text) << "long text differs from what was sent via " << target;
    EXPECT_EQ(std::string_view(got_bytes.data(), bytes_len), bytes) << "long blob differs from what was sent via " << target;
    t.add(fmt::format("long data read back: {} {} lengths {} {}", describe_bytes({got_text.data(), text_len}),
                      describe_bytes({got_bytes.data(), bytes_len}), l1, l2));
}

TEST_P(capi_stmt, send_long_data) { expect_transparent(GetParam(), long_data_scenario); }

void fetch_some(transcript& t, MYSQL* m, MYSQL_STMT* s, const std::string& name, int count) {
    for (int k = 0; count < 0 || k < count; ++k) {
        const int rc = mysql_stmt_fetch(s);
        unsigned status = 0;
        mariadb_get_infov(m, MARIADB_CONNECTION_SERVER_STATUS, &status);
        if (rc == MYSQL_NO_DATA) {
            t.add(fmt::format("{}: no more rows status=0x{:04x}", name, status));
            return;
        }
        if (rc == 1) {
            record_stmt_error(t, s, name + " fetch");
            return;
        }
        t.add(fmt::format("{}: rc={} status=0x{:04x}", name, rc, status));
    }
}

void cursors_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    const unsigned long cursor = CURSOR_TYPE_READ_ONLY;
    const unsigned long prefetch = cursor_prefetch_rows;
    auto open_cursor = [&](std::string_view sql) {
        auto s = prepare(t, m.get(), sql);
        EXPECT_EQ(mysql_stmt_attr_set(s.get(), STMT_ATTR_CURSOR_TYPE, &cursor), 0);
        EXPECT_EQ(mysql_stmt_attr_set(s.get(), STMT_ATTR_PREFETCH_ROWS, &prefetch), 0);
        return s;
    };
    auto a = open_cursor("SELECT seq, CONCAT('row-', seq), IF(seq % 4 = 0, NULL, seq / 3) FROM seq_1_to_20 WHERE seq > ?");
    auto b = open_cursor("SELECT seq * 100 FROM seq_1_to_7");
    int above = 2;
    MYSQL_BIND pb{};
    pb.buffer_type = MYSQL_TYPE_LONG;
    pb.buffer = &above;
    ASSERT_EQ(mysql_stmt_bind_param(a.get(), &pb), 0);
    long long seq = 0;
    std::array<char, 32> label{};
    unsigned long label_len = 0;
    double third = 0;
    my_bool third_null = 0;
    std::array<MYSQL_BIND, 3> ra{};
    ra[0].buffer_type = MYSQL_TYPE_LONGLONG; ra[0].buffer = &seq;
    ra[1].buffer_type = MYSQL_TYPE_STRING; ra[1].buffer = label.data(); ra[1].buffer_length = label.size(); ra[1].length = &label_len;
    ra[2].buffer_type = MYSQL_TYPE_DOUBLE; ra[2].buffer = &third; ra[2].is_null = &third_null;
    long long hundred = 0;
    MYSQL_BIND rb{};
    rb.buffer_type = MYSQL_TYPE_LONGLONG;
    rb.buffer = &hundred;

    ASSERT_EQ(mysql_stmt_execute(a.get()), 0) << mysql_stmt_error(a.get());
    record_status(t, m.get(), "cursor a opened");
    ASSERT_EQ(mysql_stmt_bind_result(a.get(), ra.data()), 0);
    auto fetch_a = [&](int count) {
        for (int k = 0; k < count; ++k) {
            const int rc = mysql_stmt_fetch(a.get());
            if (rc != 0) {
                fetch_some(t, m.get(), a.get(), "a", 0);
                t.add(fmt::format("a: rc={}", rc));
                return;
            }
            t.add(fmt::format("a row: {} {} {}", seq, std::string_view(label.data(), label_len),
                              third_null ? std::string("NULL") : fmt::format("{}", third)));
        }
    };
    fetch_a(5);
    // A second cursor and a plain statement while cursor a is open on the same connection.
    ASSERT_EQ(mysql_stmt_execute(b.get()), 0) << mysql_stmt_error(b.get());
    ASSERT_EQ(mysql_stmt_bind_result(b.get(), &rb), 0);
    for (int k = 0; k < 2; ++k) {
        fetch_some(t, m.get(), b.get(), "b", 1);
        t.add(fmt::format("b row: {}", hundred));
    }
    record_query(t, m.get(), "SELECT 'between fetches'");
    fetch_a(4);
    fetch_some(t, m.get(), b.get(), "b rest", -1);
    fetch_a(100);
    record_status(t, m.get(), "cursor a drained");
    // Re-execute, read a little, then COM_STMT_RESET closes the cursor.
    above = 15;
    ASSERT_EQ(mysql_stmt_execute(a.get()), 0) << mysql_stmt_error(a.get());
    fetch_a(2);
    EXPECT_EQ(mysql_stmt_reset(a.get()), 0) << mysql_stmt_error(a.get());
    record_status(t, m.get(), "after reset");
    ASSERT_EQ(mysql_stmt_execute(a.get()), 0) << mysql_stmt_error(a.get());
    fetch_a(100);
    // A cursor on a statement that returns no rows at all.
    auto empty = open_cursor("SELECT seq FROM seq_1_to_3 WHERE seq > 10");
    ASSERT_EQ(mysql_stmt_execute(empty.get()), 0) << mysql_stmt_error(empty.get());
    fetch_some(t, m.get(), empty.get(), "empty", -1);
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_stmt, read_only_cursors_with_prefetch) { expect_transparent(GetParam(), cursors_scenario); }

void stmt_errors_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(),
                 "CREATE OR REPLACE TABLE it_perr (id INT PRIMARY KEY, v INT);"
                 "INSERT INTO it_perr VALUES (1, 1);"
                 "CREATE OR REPLACE PROCEDURE it_pcall(IN n INT) BEGIN "
                 "  SELECT n, 'first'; SELECT id, v FROM it_perr ORDER BY id; END");
    auto bad = prepare(t, m.get(), "SELEC ?");
    auto missing = prepare(t, m.get(), "SELECT * FROM it_no_such_table WHERE id = ?");
    auto dup = prepare(t, m.get(), "INSERT INTO it_perr VALUES (1, 2)");
    execute(t, m.get(), dup.get());
    execute(t, m.get(), dup.get());
    auto call = prepare(t, m.get(), "CALL it_pcall(?)");
    int n = 42;
    MYSQL_BIND pb{};
    pb.buffer_type = MYSQL_TYPE_LONG;
    pb.buffer = &n;
    ASSERT_EQ(mysql_stmt_bind_param(call.get(), &pb), 0);
    execute(t, m.get(), call.get());
    execute(t, m.get(), call.get(), false);
    // Metadata changes between executions of one prepared statement.
    auto sel = prepare(t, m.get(), "SELECT * FROM it_perr ORDER BY id");
    execute(t, m.get(), sel.get());
    // Same column count, new types: the server re-prepares and sends the new metadata with the rows.
    record_query(t, m.get(), "ALTER TABLE it_perr MODIFY v VARCHAR(10) CHARACTER SET latin1 DEFAULT 'new'");
    execute(t, m.get(), sel.get());
    if (mysql_stmt_reset(sel.get()) != 0) {
        record_stmt_error(t, sel.get(), "reset");
    }
    // An error while the server produces rows; a fresh statement for each way of reading (libmariadb
    // cannot re-execute a statement whose buffered read failed).
    for (bool buffered : {false, true}) {
        auto div = prepare(t, m.get(), "SELECT seq, 10 DIV (seq - 3) FROM seq_1_to_5");
        execute(t, m.get(), div.get(), buffered);
    }
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_stmt, errors_procedures_and_reprepare) { expect_transparent(GetParam(), stmt_errors_scenario); }

void bulk_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_bulk (id INT PRIMARY KEY, name VARCHAR(20))");
    auto s = prepare(t, m.get(), "INSERT INTO it_bulk VALUES (?, ?)");
    std::array<int, bulk_rows> ids{};
    std::array<const char*, bulk_rows> names{};
    std::array<unsigned long, bulk_rows> lengths{};
    std::array<char, bulk_rows> indicators{};
    static constexpr std::array<const char*, bulk_rows> source{"one", "two", "", "four", "five", "six"};
    for (unsigned k = 0; k < bulk_rows; ++k) {
        ids[k] = static_cast<int>(k + 1);
        names[k] = source[k];
        lengths[k] = std::strlen(source[k]);
        indicators[k] = k == 2 ? STMT_INDICATOR_NULL : STMT_INDICATOR_NONE;
    }
    unsigned int array_size = bulk_rows;
    ASSERT_EQ(mysql_stmt_attr_set(s.get(), STMT_ATTR_ARRAY_SIZE, &array_size), 0);
    std::array<MYSQL_BIND, 2> b{};
    b[0].buffer_type = MYSQL_TYPE_LONG;
    b[0].buffer = ids.data();
    b[1].buffer_type = MYSQL_TYPE_STRING;
    b[1].buffer = names.data();
    b[1].length = lengths.data();
    b[1].u.indicator = indicators.data();
    ASSERT_EQ(mysql_stmt_bind_param(s.get(), b.data()), 0) << mysql_stmt_error(s.get());
    execute(t, m.get(), s.get());
    execute(t, m.get(), s.get());
    record_query(t, m.get(), "SELECT * FROM it_bulk ORDER BY id");
}

TEST_P(capi_stmt, bulk_array_execute) { expect_transparent(GetParam(), bulk_scenario); }

INSTANTIATE_TEST_SUITE_P(proxied, capi_stmt, ::testing::ValuesIn(proxy_targets()), target_name{});

}  // namespace
}  // namespace claimguard::integration
