// zlib frames of the compressed protocol (compression.hpp).
#include "compression.hpp"

#include <zlib.h>

#include <algorithm>

#include "frame.hpp"

namespace claimguard::protocol {

namespace {

// One deflate and one inflate state per thread, reset for each frame: deflateInit allocates ~260 KiB,
// which neither every compressed connection nor every frame should pay for.
class zlib_streams {
public:
    zlib_streams() {
        deflate_ok_ = deflateInit(&deflater_, Z_DEFAULT_COMPRESSION) == Z_OK;
        inflate_ok_ = inflateInit(&inflater_) == Z_OK;
    }
    zlib_streams(const zlib_streams&) = delete;
    zlib_streams& operator=(const zlib_streams&) = delete;
    ~zlib_streams() {
        if (deflate_ok_) deflateEnd(&deflater_);
        if (inflate_ok_) inflateEnd(&inflater_);
    }

    // Deflates `in` into `out` (room for deflateBound bytes); the compressed size, or 0 on failure.
    std::size_t deflate_all(bytes_view in, std::span<std::uint8_t> out) {
        if (!deflate_ok_ || deflateReset(&deflater_) != Z_OK) return 0;
        deflater_.next_in = const_cast<Bytef*>(in.data());
        deflater_.avail_in = static_cast<uInt>(in.size());
        deflater_.next_out = out.data();
        deflater_.avail_out = static_cast<uInt>(out.size());
        if (deflate(&deflater_, Z_FINISH) != Z_STREAM_END) return 0;
        return out.size() - deflater_.avail_out;
    }

    // Inflates all of `in`, a complete zlib stream, into exactly all of `out`.
    bool inflate_all(bytes_view in, std::span<std::uint8_t> out) {
        if (!inflate_ok_ || inflateReset(&inflater_) != Z_OK) return false;
        inflater_.next_in = const_cast<Bytef*>(in.data());
        inflater_.avail_in = static_cast<uInt>(in.size());
        inflater_.next_out = out.data();
        inflater_.avail_out = static_cast<uInt>(out.size());
        // Z_STREAM_END with every byte used on both sides; anything else (a short or corrupt stream, one
        // that inflates to more than announced, trailing bytes) is a broken frame.
        return inflate(&inflater_, Z_FINISH) == Z_STREAM_END && inflater_.avail_in == 0 && inflater_.avail_out == 0;
    }

private:
    z_stream deflater_{};
    z_stream inflater_{};
    bool deflate_ok_ = false;
    bool inflate_ok_ = false;
};

zlib_streams& streams() {
    thread_local zlib_streams s;
    return s;
}

void put_u24(std::uint8_t* p, std::size_t v) {
    p[0] = static_cast<std::uint8_t>(v);
    p[1] = static_cast<std::uint8_t>(v >> 8);
    p[2] = static_cast<std::uint8_t>(v >> 16);
}

}  // namespace

result<compressed_frame> scan_compressed_frame(bytes_view buf, std::uint8_t expected_seq, std::size_t max_payload) {
    if (buf.size() < compressed_header_size) return compressed_frame{};
    const std::size_t size = load_u24(buf.data());
    const std::size_t inflated = load_u24(buf.data() + 4);
    if (buf[3] != expected_seq) return errc::bad_sequence;
    if (size > max_payload || inflated > max_payload) return errc::packet_too_large;
    if (buf.size() - compressed_header_size < size) return compressed_frame{};
    return compressed_frame{compressed_header_size + size, buf[3], inflated == 0 ? size : inflated};
}

result<void> inflate_frame(bytes_view raw, const compressed_frame& frame, std::span<std::uint8_t> out) {
    const auto body = raw.subspan(compressed_header_size, frame.raw_size - compressed_header_size);
    if (out.size() != frame.payload_size) return errc::bad_compression;
    if (load_u24(raw.data() + 4) == 0) {  // sent as it is
        std::copy(body.begin(), body.end(), out.begin());
        return {};
    }
    if (!streams().inflate_all(body, out)) return errc::bad_compression;
    return {};
}

void write_compressed(byte_buffer& out, std::uint8_t& seq, bytes_view payload) {
    std::size_t pos = 0;
    do {
        const auto piece = payload.subspan(pos, std::min(max_compressed_payload, payload.size() - pos));
        pos += piece.size();
        const std::size_t header = out.size();
        out.resize(header + compressed_header_size);
        std::size_t body = 0;
        if (piece.size() >= min_compress_length) {
            const std::size_t bound = deflateBound(nullptr, static_cast<uLong>(piece.size()));
            out.resize(header + compressed_header_size + bound);
            body = streams().deflate_all(piece, std::span(out).subspan(header + compressed_header_size, bound));
            // Kept only when smaller, as the server does: else the piece goes uncompressed.
            if (body >= piece.size()) body = 0;
        }
        std::uint8_t* h = out.data() + header;
        if (body > 0) {
            out.resize(header + compressed_header_size + body);
            h = out.data() + header;
            put_u24(h, body);
            put_u24(h + 4, piece.size());
        } else {
            out.resize(header + compressed_header_size);
            out.insert(out.end(), piece.begin(), piece.end());
            h = out.data() + header;
            put_u24(h, piece.size());
            put_u24(h + 4, 0);
        }
        h[3] = seq++;
    } while (pos < payload.size());
}

void renumber_continuations(std::span<std::uint8_t> buf) {
    std::size_t pos = 0;
    bool first = true;
    std::uint8_t seq = 0;
    while (buf.size() - pos >= frame_header_size) {
        const auto h = parse_frame_header(buf.data() + pos);
        if (!first) buf[pos + 3] = seq;
        seq = static_cast<std::uint8_t>(buf[pos + 3] + 1);
        first = false;
        if (h.size < max_frame_payload) return;  // the packet's last frame
        if (buf.size() - pos - frame_header_size < h.size) return;
        pos += frame_header_size + h.size;
    }
}

void sequence_renumbering::apply(std::span<std::uint8_t> inflated) {
    std::size_t pos = 0;
    while (pos < inflated.size()) {
        if (body_left_ > 0) {
            const std::size_t n = std::min(body_left_, inflated.size() - pos);
            body_left_ -= n;
            pos += n;
        } else if (header_have_ < 3) {
            header_[header_have_++] = inflated[pos++];
        } else {
            inflated[pos++] = next_++;
            body_left_ = load_u24(header_);
            header_have_ = 0;
        }
    }
}

std::uint8_t next_sequence_id(bytes_view raw) {
    std::size_t pos = 0;
    std::uint8_t next = raw.size() >= frame_header_size ? static_cast<std::uint8_t>(raw[3] + 1) : 0;
    while (raw.size() - pos >= frame_header_size) {
        next = static_cast<std::uint8_t>(raw[pos + 3] + 1);
        pos += frame_header_size + load_u24(raw.data() + pos);
        if (pos > raw.size()) break;
    }
    return next;
}

}  // namespace claimguard::protocol
