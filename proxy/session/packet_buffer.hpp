// A growable byte buffer for socket reads: bytes are appended at the end and
// consumed from the front, and complete packets are handed out as views.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace claimguard::session {

class packet_buffer {
public:
    explicit packet_buffer(std::size_t initial = 16 * 1024) : data_(initial) {}

    [[nodiscard]] std::span<const std::uint8_t> readable() const {
        return {data_.data() + begin_, end_ - begin_};
    }
    [[nodiscard]] std::size_t size() const { return end_ - begin_; }

    void consume(std::size_t n) {
        begin_ += std::min(n, size());
        if (begin_ == end_) begin_ = end_ = 0;
    }

    // Room for at least `min_bytes` more at the end (compacting or growing).
    [[nodiscard]] std::span<std::uint8_t> prepare(std::size_t min_bytes) {
        if (data_.size() - end_ < min_bytes) {
            if (begin_ > 0) {
                std::memmove(data_.data(), data_.data() + begin_, size());
                end_ -= begin_;
                begin_ = 0;
            }
            if (data_.size() - end_ < min_bytes) data_.resize(std::max(data_.size() * 2, end_ + min_bytes));
        }
        return {data_.data() + end_, data_.size() - end_};
    }
    void commit(std::size_t n) { end_ += n; }

    // Gives memory back after a large packet went through.
    void shrink_if_idle(std::size_t keep) {
        if (size() == 0 && data_.size() > keep) {
            data_.resize(keep);
            data_.shrink_to_fit();
        }
    }

private:
    std::vector<std::uint8_t> data_;
    std::size_t begin_ = 0;
    std::size_t end_ = 0;
};

}  // namespace claimguard::session
