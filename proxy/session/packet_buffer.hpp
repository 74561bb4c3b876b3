// A growable byte buffer for socket reads: bytes are appended at the end and consumed from the front, and
// complete packets are handed out as views.
//
// Storage is taken on the first prepare() and given back by release() once everything was consumed: an
// idle session holds only the client's small buffer (the backend's goes back between commands; the
// client's first read of a command goes to a small one). Storage of the standard size goes to a small
// per-thread spare list rather than to malloc, so a busy session takes it back for its next command
// without a malloc/free pair (and without the page faults of a heap trimmed and grown again).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace claimguard::session {

class packet_buffer {
public:
    // What a buffer holds while in use unless a larger packet needs more: the size of one socket read.
    static constexpr std::size_t standard_bytes = 64 * 1024;
    // The storage of a buffer asked for no more than this: the client's between commands. One page; most
    // commands fit (a larger one takes a standard buffer for its rest).
    static constexpr std::size_t small_bytes = 4 * 1024;
    // Released standard storage kept per I/O thread for the next session that needs it (2 MiB per thread);
    // beyond this it goes back to malloc. Bounds the memory idle sessions leave behind after a burst.
    static constexpr std::size_t spare_buffers_per_thread = 32;

    packet_buffer() = default;
    packet_buffer(const packet_buffer&) = delete;
    packet_buffer& operator=(const packet_buffer&) = delete;
    // Frees its storage: a session may end while the process exits, after this thread's spare list is gone.
    ~packet_buffer() = default;

    [[nodiscard]] std::span<const std::uint8_t> readable() const { return {data_.get() + begin_, end_ - begin_}; }
    // The same bytes, to patch in place (a compressed client's continuation frame ids).
    [[nodiscard]] std::span<std::uint8_t> writable() { return {data_.get() + begin_, end_ - begin_}; }
    [[nodiscard]] std::size_t size() const { return end_ - begin_; }
    [[nodiscard]] std::size_t capacity() const { return capacity_; }  // 0: no storage held

    void consume(std::size_t n) {
        begin_ += std::min(n, size());
        if (begin_ == end_) begin_ = end_ = 0;
    }

    // Room for at least `min_bytes` more at the end (taking storage, compacting or growing).
    [[nodiscard]] std::span<std::uint8_t> prepare(std::size_t min_bytes) {
        if (capacity_ - end_ < min_bytes) {
            if (begin_ > 0) {
                std::memmove(data_.get(), data_.get() + begin_, size());
                end_ -= begin_;
                begin_ = 0;
            }
            if (capacity_ - end_ < min_bytes) grow(std::max(capacity_ * 2, end_ + min_bytes));
        }
        return {data_.get() + end_, capacity_ - end_};
    }
    void commit(std::size_t n) { end_ += n; }

    // Gives the storage back when nothing is buffered (else keeps it: the bytes are still to be read).
    void release() {
        if (size() > 0) return;
        give_back();
        begin_ = end_ = 0;
    }
    // Gives memory back after a large packet went through.
    void shrink_if_idle(std::size_t keep) {
        if (capacity_ > keep) release();
    }

    // Standard storage in this thread's spare list (tests).
    [[nodiscard]] static std::size_t spare_buffers() { return spares().size(); }

private:
    using storage = std::unique_ptr<std::uint8_t[]>;

    static std::vector<storage>& spares() {
        thread_local std::vector<storage> list;
        return list;
    }

    void grow(std::size_t wanted) {
        const std::size_t bytes = wanted <= small_bytes ? small_bytes : std::max(wanted, standard_bytes);
        storage next;
        if (bytes == standard_bytes && !spares().empty()) {
            next = std::move(spares().back());
            spares().pop_back();
        } else {
            next = std::make_unique_for_overwrite<std::uint8_t[]>(bytes);  // no zeroing: reads fill it
        }
        if (end_ > 0) std::memcpy(next.get(), data_.get(), end_);
        give_back();  // the storage only: begin_ is 0 (prepare compacted) and end_ stays
        data_ = std::move(next);
        capacity_ = bytes;
    }

    void give_back() {
        if (data_ && capacity_ == standard_bytes && spares().size() < spare_buffers_per_thread) {
            if (spares().capacity() == 0) spares().reserve(spare_buffers_per_thread);
            spares().push_back(std::move(data_));
        }
        data_.reset();
        capacity_ = 0;
    }

    storage data_;
    std::size_t capacity_ = 0;
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
};

}  // namespace claimguard::session
