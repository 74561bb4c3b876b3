// resp_decoder: hiredis's redisReader with reply-object callbacks that build resp_value trees
// (and refuse arrays past the limit), and redisFormatCommandArgv for commands.
#include "resp.hpp"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <new>

namespace claimguard::guards {

namespace {

// Where a reader task's object goes: inside its parent array (pre-sized, never resized, so
// pointers into it stay valid), or a new top-level value that the caller takes.
resp_value* place(const redisReadTask* task) {
    if (task->parent) {
        auto* parent = static_cast<resp_value*>(task->parent->obj);
        return &parent->elements[static_cast<std::size_t>(task->idx)];
    }
    return new (std::nothrow) resp_value;
}

void* create_string(const redisReadTask* task, char* s, std::size_t len) {
    auto* v = place(task);
    if (!v) return nullptr;
    switch (task->type) {
    case REDIS_REPLY_ERROR: v->type = resp_value::kind::error; break;
    case REDIS_REPLY_STATUS: v->type = resp_value::kind::status; break;
    default: v->type = resp_value::kind::string; break;
    }
    v->str.assign(s, len);
    return v;
}

void* create_array(const redisReadTask* task, int elements) {
    if (elements < 0 || elements > max_reply_array_elements) return nullptr;  // the reader reports it
    auto* v = place(task);
    if (!v) return nullptr;
    v->type = resp_value::kind::array;
    v->elements.resize(static_cast<std::size_t>(elements));
    return v;
}

void* create_integer(const redisReadTask* task, long long value) {
    auto* v = place(task);
    if (!v) return nullptr;
    v->type = resp_value::kind::integer;
    v->integer = value;
    return v;
}

void* create_nil(const redisReadTask* task) {
    auto* v = place(task);
    if (v) v->type = resp_value::kind::nil;
    return v;
}

// Only top-level replies are freed; children live inside them.
void free_object(void* p) { delete static_cast<resp_value*>(p); }

redisReplyObjectFunctions resp_functions{create_string, create_array, create_integer, create_nil, free_object};

}  // namespace

resp_decoder::resp_decoder() : reader_(redisReaderCreateWithFunctions(&resp_functions)) {
    if (!reader_) throw std::bad_alloc();
}

resp_decoder::~resp_decoder() { redisReaderFree(reader_); }

bool resp_decoder::feed(std::span<const char> bytes) {
    if (!error_.empty()) return false;
    if (redisReaderFeed(reader_, bytes.data(), bytes.size()) != REDIS_OK) {
        error_ = "cannot buffer the reply";
        return false;
    }
    if (reader_->len - reader_->pos > max_pending_reply_bytes) {
        error_ = "reply larger than the limit";
        return false;
    }
    return true;
}

resp_decoder::status resp_decoder::next(resp_value& out) {
    if (!error_.empty()) return status::broken;
    void* reply = nullptr;
    if (redisReaderGetReply(reader_, &reply) != REDIS_OK) {
        error_ = reader_->errstr[0] ? reader_->errstr : "protocol error";
        return status::broken;
    }
    if (!reply) return status::need_more;
    std::unique_ptr<resp_value> owned(static_cast<resp_value*>(reply));
    out = std::move(*owned);
    return status::value;
}

std::string format_command(std::span<const std::string_view> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(args.size());
    lens.reserve(args.size());
    for (auto a : args) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    char* cmd = nullptr;
    int len = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (len < 0 || !cmd) throw std::bad_alloc();
    std::string out(cmd, static_cast<std::size_t>(len));
    redisFreeCommand(cmd);
    return out;
}

}  // namespace claimguard::guards
