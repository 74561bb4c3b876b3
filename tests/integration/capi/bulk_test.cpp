// Large payloads through claimguard: 20 MiB BLOBs (text and binary protocol) and LOAD DATA LOCAL INFILE.
#include "tests/integration/capi/harness.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <fstream>

namespace claimguard::integration {
namespace {

// Rows in the generated LOCAL INFILE file: a few MiB, so the file travels in many packets.
constexpr int infile_rows = 60000;

class capi_bulk : public ::testing::TestWithParam<std::string> {};

std::string pattern_bytes(std::size_t size, unsigned seed) {
    std::string out(size, '\0');
    std::uint32_t x = seed * 2654435761u + 1u;
    for (auto& c : out) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = static_cast<char>(x & 0xff);
    }
    return out;
}

std::string read_back_text(MYSQL* m, std::string_view sql) {
    if (mysql_real_query(m, sql.data(), sql.size()) != 0) {
        return fmt::format("ERR {} {}", mysql_errno(m), mysql_error(m));
    }
    result_ptr r(mysql_store_result(m));
    if (!r) {
        return fmt::format("ERR {} {}", mysql_errno(m), mysql_error(m));
    }
    MYSQL_ROW row = mysql_fetch_row(r.get());
    if (row == nullptr || row[0] == nullptr) {
        return "no row";
    }
    return std::string(row[0], mysql_fetch_lengths(r.get())[0]);
}

void big_blob_text_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    const std::string blob = pattern_bytes(big_blob_bytes, 1);
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_big (id INT PRIMARY KEY, data LONGBLOB)");
    // Hex literal: the query itself is 40 MiB, three wire packets.
    static constexpr std::array<char, 16> hex{'0', '1', '2', '3', '4', '5', '6', '7',
                                              '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
    std::string sql = "INSERT INTO it_big VALUES (1, X'";
    sql.reserve(sql.size() + blob.size() * 2 + 8);
    for (unsigned char c : blob) {
        sql += hex[c >> 4];
        sql += hex[c & 0x0f];
    }
    sql += "')";
    record_query(t, m.get(), sql);
    // Escaped string literal, as drivers that interpolate parameters send it.
    std::string escaped(blob.size() * 2 + 1, '\0');
    const unsigned long n = mysql_real_escape_string(m.get(), escaped.data(), blob.data(), blob.size());
    escaped.resize(n);
    record_query(t, m.get(), "INSERT INTO it_big VALUES (2, '" + escaped + "')");
    const std::string got1 = read_back_text(m.get(), "SELECT data FROM it_big WHERE id = 1");
    const std::string got2 = read_back_text(m.get(), "SELECT data FROM it_big WHERE id = 2");
    EXPECT_TRUE(got1 == blob) << "hex-inserted blob read back via " << target << ": " << got1.size() << " bytes";
    EXPECT_TRUE(got2 == blob) << "escaped blob read back via " << target << ": " << got2.size() << " bytes";
    t.add(fmt::format("read back {} and {}", describe_bytes(got1), describe_bytes(got2)));
    record_query(t, m.get(), "SELECT id, LENGTH(data), MD5(data) FROM it_big ORDER BY id");
    record_query(t, m.get(), "SELECT data FROM it_big ORDER BY id", fetch_mode::use);
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_bulk, blob_20mib_text_protocol) { expect_transparent(GetParam(), big_blob_text_scenario); }

void big_blob_stmt_scenario(transcript& t, std::string_view target) {
    auto m = connect(target);
    const std::string blob = pattern_bytes(big_blob_bytes, 2);
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_big_ps (id INT PRIMARY KEY, data LONGBLOB)");
    stmt_ptr ins(mysql_stmt_init(m.get()));
    const std::string_view q = "INSERT INTO it_big_ps VALUES (?, ?)";
    ASSERT_EQ(mysql_stmt_prepare(ins.get(), q.data(), q.size()), 0) << mysql_stmt_error(ins.get());
    int id = 1;
    unsigned long len = blob.size();
    std::array<MYSQL_BIND, 2> b{};
    b[0].buffer_type = MYSQL_TYPE_LONG;
    b[0].buffer = &id;
    b[1].buffer_type = MYSQL_TYPE_LONG_BLOB;
    b[1].buffer = const_cast<char*>(blob.data());
    b[1].buffer_length = len;
    b[1].length = &len;
    ASSERT_EQ(mysql_stmt_bind_param(ins.get(), b.data()), 0);
    // One COM_STMT_EXECUTE packet of more than 16 MiB.
    if (mysql_stmt_execute(ins.get()) != 0) {
        record_stmt_error(t, ins.get(), "execute 20 MiB");
    } else {
        record_stmt_results(t, m.get(), ins.get());
    }
    stmt_ptr sel(mysql_stmt_init(m.get()));
    const std::string_view qs = "SELECT data, LENGTH(data) FROM it_big_ps WHERE id = ?";
    ASSERT_EQ(mysql_stmt_prepare(sel.get(), qs.data(), qs.size()), 0) << mysql_stmt_error(sel.get());
    MYSQL_BIND pb{};
    pb.buffer_type = MYSQL_TYPE_LONG;
    pb.buffer = &id;
    ASSERT_EQ(mysql_stmt_bind_param(sel.get(), &pb), 0);
    for (bool buffered : {true, false}) {
        ASSERT_EQ(mysql_stmt_execute(sel.get()), 0) << mysql_stmt_error(sel.get());
        if (buffered) {
            ASSERT_EQ(mysql_stmt_store_result(sel.get()), 0) << mysql_stmt_error(sel.get());
        }
        std::string got(blob.size() + 1, '\0');
        unsigned long got_len = 0;
        long long length = 0;
        std::array<MYSQL_BIND, 2> r{};
        r[0].buffer_type = MYSQL_TYPE_LONG_BLOB;
        r[0].buffer = got.data();
        r[0].buffer_length = got.size();
        r[0].length = &got_len;
        r[1].buffer_type = MYSQL_TYPE_LONGLONG;
        r[1].buffer = &length;
        ASSERT_EQ(mysql_stmt_bind_result(sel.get(), r.data()), 0);
        const int rc = mysql_stmt_fetch(sel.get());
        t.add(fmt::format("fetch buffered={} rc={} length={} {}", buffered, rc, length, describe_bytes({got.data(), got_len})));
        EXPECT_EQ(rc, 0) << mysql_stmt_error(sel.get());
        EXPECT_TRUE(std::string_view(got.data(), got_len) == blob) << "prepared 20 MiB read back via " << target;
        EXPECT_EQ(mysql_stmt_fetch(sel.get()), MYSQL_NO_DATA);
        mysql_stmt_free_result(sel.get());
    }
    record_query(t, m.get(), "SELECT 'still in sync'");
}

TEST_P(capi_bulk, blob_20mib_binary_protocol) { expect_transparent(GetParam(), big_blob_stmt_scenario); }

struct temp_file {
    std::string path;
    explicit temp_file(std::string p) : path(std::move(p)) {}
    ~temp_file() { std::remove(path.c_str()); }
    temp_file(const temp_file&) = delete;
    temp_file& operator=(const temp_file&) = delete;
};

void local_infile_scenario(transcript& t, std::string_view target) {
    const auto& env = fixture_env::get();
    temp_file small(env.state_dir() + "/it_infile_small.csv");
    temp_file large(env.state_dir() + "/it_infile_large.csv");
    {
        std::ofstream out(small.path, std::ios::binary);
        out << "1,alpha,1.5\n2,\\N,2.5\n3,\"quoted, comma\",\\N\nnot-a-number,x,y\n";
        std::ofstream big(large.path, std::ios::binary);
        for (int k = 0; k < infile_rows; ++k) {
            big << k + 100 << ",name-" << k << "-" << std::string(static_cast<std::size_t>(k % 50), 'p') << ","
                << k * 0.25 << "\n";
        }
    }
    auto m = connect(target, {.local_infile = true});
    record_query(t, m.get(), "CREATE OR REPLACE TABLE it_infile (id INT PRIMARY KEY, name VARCHAR(80), v DOUBLE)");
    const std::string load = "LOAD DATA LOCAL INFILE '{}' INTO TABLE it_infile FIELDS TERMINATED BY ',' "
                             "OPTIONALLY ENCLOSED BY '\"'";
    record_query(t, m.get(), fmt::format(fmt::runtime(load), small.path));
    record_query(t, m.get(), "SHOW WARNINGS");
    record_query(t, m.get(), fmt::format(fmt::runtime(load), large.path));
    record_query(t, m.get(), "SELECT COUNT(*), SUM(id), MD5(GROUP_CONCAT(name ORDER BY id)) FROM it_infile");
    // A file the client cannot open: the client sends an empty file and reports the error.
    record_query(t, m.get(), fmt::format(fmt::runtime(load), env.state_dir() + "/it_no_such_file.csv"));
    // A duplicate key inside the file: the server's error after it read the whole file.
    record_query(t, m.get(), fmt::format(fmt::runtime(load), small.path) + " SET id = 1");
    record_query(t, m.get(), fmt::format(fmt::runtime(load), small.path) + " IGNORE 3 LINES");
    record_query(t, m.get(), "SELECT 'still in sync'");
    // A client that did not enable LOCAL INFILE is refused the same way as directly.
    auto refusing = connect(target);
    record_query(t, refusing.get(), fmt::format(fmt::runtime(load), small.path));
    record_query(t, refusing.get(), "SELECT 'still in sync'");
}

TEST_P(capi_bulk, load_data_local_infile) { expect_transparent(GetParam(), local_infile_scenario); }

INSTANTIATE_TEST_SUITE_P(proxied, capi_bulk, ::testing::ValuesIn(proxy_targets()), target_name{});

}  // namespace
}  // namespace claimguard::integration
