// A libmariadb client for it_unix_socket.py: runs prepared statements (COM_STMT_PREPARE/EXECUTE)
// over TCP or a unix socket and prints what they answered, one line each, for comparing the two.
#include <mysql.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr std::size_t max_columns = 16;
constexpr std::size_t column_bytes = 256;

// Usage: stmt_client tcp HOST PORT | unix PATH, then USER PASSWORD DATABASE, then STATEMENTS, each
// one argument: "SQL|param|param..." (integer parameters).
int run(int argc, char** argv) {
    if (argc < 7) {
        std::fprintf(stderr, "usage: stmt_client tcp HOST PORT|unix PATH USER PASSWORD DATABASE 'SQL|p|p'...\n");
        return 2;
    }
    const std::string how = argv[1];
    int arg = 2;
    const char* host = nullptr;
    unsigned port = 0;
    const char* socket = nullptr;
    if (how == "tcp") {
        host = argv[arg++];
        port = static_cast<unsigned>(std::atoi(argv[arg++]));
    } else {
        socket = argv[arg++];
    }
    const char* user = argv[arg++];
    const char* password = argv[arg++];
    const char* database = argv[arg++];
    MYSQL* db = mysql_init(nullptr);
    unsigned protocol = socket ? MYSQL_PROTOCOL_SOCKET : MYSQL_PROTOCOL_TCP;
    mysql_options(db, MYSQL_OPT_PROTOCOL, &protocol);
    if (!mysql_real_connect(db, socket ? "localhost" : host, user, password, database, port, socket, 0)) {
        std::printf("connect ERR %u %s\n", mysql_errno(db), mysql_error(db));
        return 1;
    }
    for (; arg < argc; ++arg) {
        std::string spec = argv[arg];
        std::vector<long long> params;
        auto bar = spec.find('|');
        std::string sql = spec.substr(0, bar);
        while (bar != std::string::npos) {
            auto next = spec.find('|', bar + 1);
            params.push_back(std::atoll(spec.substr(bar + 1, next - bar - 1).c_str()));
            bar = next;
        }
        MYSQL_STMT* st = mysql_stmt_init(db);
        if (mysql_stmt_prepare(st, sql.c_str(), sql.size())) {
            std::printf("prepare ERR %u\n", mysql_stmt_errno(st));
            mysql_stmt_close(st);
            continue;
        }
        std::vector<MYSQL_BIND> in(params.size());
        for (std::size_t i = 0; i < params.size(); ++i) {
            in[i] = MYSQL_BIND{};
            in[i].buffer_type = MYSQL_TYPE_LONGLONG;
            in[i].buffer = &params[i];
        }
        if ((!in.empty() && mysql_stmt_bind_param(st, in.data())) || mysql_stmt_execute(st)) {
            std::printf("ERR %u\n", mysql_stmt_errno(st));
            mysql_stmt_close(st);
            continue;
        }
        const unsigned columns = mysql_stmt_field_count(st);
        if (columns == 0) {
            std::printf("OK %llu\n", static_cast<unsigned long long>(mysql_stmt_affected_rows(st)));
        } else if (columns <= max_columns) {
            std::vector<MYSQL_BIND> out(columns);
            std::vector<std::vector<char>> values(columns, std::vector<char>(column_bytes));
            std::vector<unsigned long> lengths(columns);
            std::vector<my_bool> nulls(columns);
            for (unsigned i = 0; i < columns; ++i) {
                out[i] = MYSQL_BIND{};
                out[i].buffer_type = MYSQL_TYPE_STRING;
                out[i].buffer = values[i].data();
                out[i].buffer_length = column_bytes;
                out[i].length = &lengths[i];
                out[i].is_null = &nulls[i];
            }
            mysql_stmt_bind_result(st, out.data());
            std::string rows;
            while (mysql_stmt_fetch(st) == 0) {
                rows += "[";
                for (unsigned i = 0; i < columns; ++i)
                    rows +=
                        (i ? "," : "") + (nulls[i] ? std::string("NULL") : std::string(values[i].data(), lengths[i]));
                rows += "]";
            }
            std::printf("ROWS %s\n", rows.c_str());
        }
        mysql_stmt_close(st);
    }
    mysql_close(db);
    return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
