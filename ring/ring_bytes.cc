#include "ring/ring_bytes.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

absl::Status WithContext(const absl::Status& status, const char* what,
                         int64_t op_id, int32_t stage,
                         const RingTransport& transport) {
  return absl::Status(status.code(),
                      absl::StrCat(what, " op ", op_id, " stage ", stage,
                                   " (rank ", transport.rank(), " of ",
                                   transport.size(), "): ", status.message()));
}

int64_t NumPieces(int64_t bytes, int64_t piece_bytes) {
  return bytes == 0 ? 0 : (bytes - 1) / piece_bytes + 1;
}

absl::Status SendPiece(RingTransport& transport, int64_t op_id, int32_t stage,
                       int32_t piece, std::string bytes) {
  return transport.SendBytes(RingTag{op_id, stage, piece}, std::move(bytes));
}

static_assert(std::endian::native == std::endian::little,
              "the payload header is a little-endian uint64");

std::string Header(uint64_t size) {
  std::string header(8, '\0');
  std::memcpy(header.data(), &size, 8);
  return header;
}

absl::Status SendPayload(RingTransport& transport, int64_t op_id, int32_t stage,
                         absl::string_view payload, int64_t piece_bytes) {
  RETURN_IF_ERROR(
      SendPiece(transport, op_id, stage, 0, Header(payload.size())));
  const int64_t pieces = NumPieces(payload.size(), piece_bytes);
  for (int64_t p = 0; p < pieces; ++p) {
    RETURN_IF_ERROR(
        SendPiece(transport, op_id, stage, static_cast<int32_t>(p + 1),
                  std::string(payload.substr(p * piece_bytes, piece_bytes))));
  }
  return absl::OkStatus();
}

// Receives the payload sent under (op_id, stage) from the previous rank;
// with forward_stage >= 0 every message goes on to the next rank under that
// stage as soon as it has arrived.
absl::StatusOr<std::string> RecvPayload(RingTransport& transport, int64_t op_id,
                                        int32_t stage, int32_t forward_stage,
                                        int64_t piece_bytes,
                                        absl::Time deadline) {
  ASSIGN_OR_RETURN(std::string header,
                   transport.RecvBytes(RingTag{op_id, stage, 0}, deadline));
  if (header.size() != 8) {
    return absl::DataLossError(
        absl::StrCat("payload header of ", header.size(), " bytes, not 8"));
  }
  uint64_t size = 0;
  std::memcpy(&size, header.data(), 8);
  if (size > static_cast<uint64_t>(kMaxRingPayloadBytes)) {
    return absl::DataLossError(absl::StrCat("payload of ", size,
                                            " bytes, more than the limit ",
                                            kMaxRingPayloadBytes));
  }
  if (forward_stage >= 0) {
    RETURN_IF_ERROR(
        SendPiece(transport, op_id, forward_stage, 0, std::move(header)));
  }
  std::string payload;
  payload.reserve(size);
  const int64_t pieces = NumPieces(static_cast<int64_t>(size), piece_bytes);
  for (int64_t p = 0; p < pieces; ++p) {
    const int32_t tag_piece = static_cast<int32_t>(p + 1);
    ASSIGN_OR_RETURN(
        std::string piece,
        transport.RecvBytes(RingTag{op_id, stage, tag_piece}, deadline));
    const int64_t expected = std::min<int64_t>(
        piece_bytes, static_cast<int64_t>(size) - p * piece_bytes);
    if (static_cast<int64_t>(piece.size()) != expected) {
      return absl::DataLossError(absl::StrCat("payload piece ", tag_piece,
                                              " holds ", piece.size(),
                                              " bytes, expected ", expected));
    }
    payload.append(piece);
    if (forward_stage >= 0) {
      RETURN_IF_ERROR(SendPiece(transport, op_id, forward_stage, tag_piece,
                                std::move(piece)));
    }
  }
  return payload;
}

absl::Status CheckArgs(const char* what, const RingTransport& transport,
                       int64_t piece_bytes) {
  if (piece_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": piece_bytes must be >= 1, got ", piece_bytes));
  }
  if (transport.size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": empty ring"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AllGatherBytes(
    RingTransport& transport, int64_t op_id, std::string mine,
    int64_t piece_bytes, absl::Time deadline) {
  RETURN_IF_ERROR(CheckArgs("AllGatherBytes", transport, piece_bytes));
  const int n = transport.size();
  const int r = transport.rank();
  std::vector<std::string> out(n);
  if (static_cast<int64_t>(mine.size()) > kMaxRingPayloadBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllGatherBytes: payload of ", mine.size(),
                     " bytes, more than ", kMaxRingPayloadBytes));
  }
  if (n > 1) {
    if (absl::Status s = SendPayload(transport, op_id, 0, mine, piece_bytes);
        !s.ok()) {
      return WithContext(s, "AllGatherBytes", op_id, 0, transport);
    }
  }
  out[r] = std::move(mine);
  for (int32_t stage = 0; stage + 1 < n; ++stage) {
    // The payload of rank r - stage - 1 arrives at stage `stage` and goes
    // on unless its next rank is its owner.
    const bool forward = stage + 2 < n;
    auto payload = RecvPayload(transport, op_id, stage,
                               forward ? stage + 1 : -1, piece_bytes, deadline);
    if (!payload.ok()) {
      return WithContext(payload.status(), "AllGatherBytes", op_id, stage,
                         transport);
    }
    out[(r - stage - 1 + n) % n] = *std::move(payload);
  }
  return out;
}

absl::Status BroadcastBytes(RingTransport& transport, int64_t op_id,
                            std::string& payload, int root, int64_t piece_bytes,
                            absl::Time deadline) {
  RETURN_IF_ERROR(CheckArgs("BroadcastBytes", transport, piece_bytes));
  const int n = transport.size();
  if (root < 0 || root >= n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BroadcastBytes op ", op_id, ": root ", root, " outside [0, ", n, ")"));
  }
  if (n == 1) return absl::OkStatus();
  const int distance = (transport.rank() - root + n) % n;
  if (distance == 0) {
    if (absl::Status s = SendPayload(transport, op_id, 0, payload, piece_bytes);
        !s.ok()) {
      return WithContext(s, "BroadcastBytes", op_id, 0, transport);
    }
    return absl::OkStatus();
  }
  const bool forward = distance + 1 < n;  // the next rank is not root
  auto received = RecvPayload(transport, op_id, distance - 1,
                              forward ? distance : -1, piece_bytes, deadline);
  if (!received.ok()) {
    return WithContext(received.status(), "BroadcastBytes", op_id, distance - 1,
                       transport);
  }
  payload = *std::move(received);
  return absl::OkStatus();
}

}  // namespace ferry
