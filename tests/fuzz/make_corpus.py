#!/usr/bin/python3
"""Writes the seed corpora of the fuzz targets: tests/fuzz/corpus/<target>/.

Usage: tests/fuzz/make_corpus.py [OUT_DIR]   (default: corpus/ beside this file)

Each seed is small and valid (or one step away from valid), so the fuzzer
starts from requests the services accept. Structured-mode seeds follow the
byte layout the targets decode with FuzzInput (see each target's comment):
`In` below mirrors FuzzInput's readers. Regenerating overwrites the seeds
with identical bytes (deterministic).
"""
import gzip
import os
import struct
import sys
import zlib


# --- protobuf wire encoding (proto3, just what the seeds need) -----------
def varint(v):
    v &= (1 << 64) - 1  # negative int64: 10-byte two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_int(field, v):
    return varint(field << 3) + varint(v) if v else b""


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(field << 3 | 2) + varint(len(b)) + b


def floats(*vals):
    return struct.pack("<%df" % len(vals), *vals)


# --- FuzzInput mirror ----------------------------------------------------
class In:
    def __init__(self, *prefix):
        self.b = bytearray(prefix)

    def byte(self, v):
        self.b.append(v & 0xFF)
        return self

    def int(self, v, n):
        self.b += (v & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        return self

    def range(self, lo, hi, v):  # FuzzInput::Range
        if hi - lo < 256:
            return self.byte(v - lo)
        return self.int(v - lo, 8)

    def frame(self, data):  # FuzzInput::Frame
        if len(data) < 255:
            self.byte(len(data))
        else:
            self.byte(255).int(len(data), 2)
        self.b += data
        return self

    def raw(self, data):
        self.b += data
        return self

    def bytes(self):
        return bytes(self.b)


def frames(*messages):
    out = In()
    for m in messages:
        out.frame(m)
    return out.bytes()


# --- ps_service_fuzz -----------------------------------------------------
def push_header(worker="w0", step=0, samples=1, generation=0):
    return (f_bytes(1, "job") + f_bytes(2, worker) + f_int(3, generation) +
            f_int(4, step) + f_int(5, samples))


def ps_push(i, worker, samples, chunk_lengths, generation=0):
    """PushOp: a complete fp32 push of `worker` for the open step."""
    i.byte(0)  # op: push
    i.byte(0x00).byte(int(worker[1:]))  # flags, worker
    i.byte(0).range(-1, 6, generation).byte(3)  # job, generation, step = v
    i.range(-1, 14, samples).byte(0)  # num_samples, base_version = v
    for length in chunk_lengths:
        i.byte(0).byte(0).byte(0)  # no mutation, fp32, well formed
        for k in range(length):
            i.byte(0).byte(16 + k)  # value (16 + k) / 16
        i.byte(3)  # top-k ratio (unused)


def ps_seeds():
    layout0 = [1, 2, 1]  # shard 1 of {5, 3} in chunks of <= 2: ids 2, 3, 4
    seeds = {
        "raw_push": b"\x00" + frames(
            f_bytes(1, push_header()),
            f_int(2, 2) + f_bytes(3, floats(0.5)),
            f_int(2, 3) + f_bytes(3, floats(0.25, -1.0)),
            f_int(2, 4) + f_bytes(3, floats(2.0))),
        "raw_push_fp16": b"\x00" + frames(
            f_bytes(1, push_header("w1", 0, 3)) + f_int(2, 2) +
            f_bytes(3, b"\x00\x3c") + f_int(4, 1),
            f_int(2, 3) + f_bytes(3, b"\x00\x3c\x00\xbc") + f_int(4, 1),
            f_int(2, 4) + f_bytes(3, b"\x00\x00\x00\x00" + floats(1.0)) +
            f_int(4, 3)),
        "raw_pull": b"\x01" + f_bytes(1, "job") + f_bytes(2, "w0"),
        "raw_finalize": b"\x02" + f_bytes(1, "job") + f_bytes(
            3, f_bytes(1, "w0") + f_int(2, 1)),
        "raw_info": b"\x03",
        "raw_checkpoint": b"\x04" + f_bytes(1, "job") + f_int(2, -1),
        "raw_fence": b"\x06" + f_bytes(1, "job") + f_int(2, 3),
        "raw_pull_rows": b"\x07" + f_bytes(1, "job") + f_bytes(2, "w0") +
        f_bytes(4, f_int(1, 0)),
        "raw_read_tables": b"\x08" + f_bytes(1, "job"),
        "raw_restore": b"\x05" + f_bytes(1, "job") + f_int(3, 1),
    }
    # Sync step on layout 0: push, finalize, pull, info, checkpoint,
    # corrupt the file, restore it, raw shard info.
    i = In(0x80, 0x00)
    ps_push(i, "w0", 1, layout0)
    ps_push(i, "w1", 2, layout0)
    i.byte(2).byte(0).byte(3).range(-1, 6, 0).byte(0x03).byte(0).byte(0)
    i.byte(3).byte(0).byte(1)  # pull version v
    i.byte(4)  # info
    i.byte(5).byte(0).byte(2)  # checkpoint the current version
    i.byte(3).byte(0).byte(3)  # pull v + 1: left waiting
    ps_push(i, "w0", 1, layout0)
    i.byte(2).byte(0).byte(3).range(-1, 6, 0).byte(0x01).byte(0)
    i.byte(6).byte(0).byte(1).range(-1, 6, 1)  # restore the checkpoint
    i.byte(7).byte(2).int(40, 2).byte(1)  # flip a byte of the newest file
    i.byte(6).byte(0).byte(1).range(-1, 6, 2)
    i.byte(8).byte(3).frame(b"")  # raw ShardInfo
    seeds["sync_step"] = i.bytes()
    # Async Adam on one shard of {7}: pushes apply on arrival.
    i = In(0x80, 0x33)  # layout 1, adam, async
    ps_push(i, "w0", 2, [7])
    ps_push(i, "w1", 1, [7])
    i.byte(3).byte(0).byte(1)
    i.byte(5).byte(0).byte(1)
    i.byte(4)
    seeds["async_adam"] = i.bytes()
    # Sync Adam (layout 1): two workers, finalize, checkpoint, restore.
    i = In(0x80, 0x10)
    ps_push(i, "w0", 1, [7])
    ps_push(i, "w1", 1, [7])
    i.byte(2).byte(0).byte(3).range(-1, 6, 0).byte(0x03).byte(0).byte(0)
    i.byte(5).byte(0).byte(2)
    i.byte(6).byte(0).byte(1).range(-1, 6, 1)
    i.byte(3).byte(0).byte(1)
    seeds["sync_adam_restore"] = i.bytes()
    return seeds


# --- coordinator_service_fuzz --------------------------------------------
def co_register(i):
    i.byte(0).byte(0x02).int(1234, 2)


def co_next(i, worker, report):
    i.byte(6).byte(worker)
    if report:
        i.byte(0x00).byte(0).range(0, 100, 7)  # report the lease as is
    else:
        i.byte(0x20)  # no report


def coordinator_seeds():
    seeds = {
        "raw_register": b"\x00" + f_bytes(1, "job") + f_bytes(3, "host"),
        "raw_heartbeat": b"\x01" + f_bytes(1, "w-0") + f_int(2, 1),
        "raw_leave": b"\x02" + f_bytes(1, "w-0"),
        "raw_getjob": b"\x03",
        "raw_nexttask": b"\x04" + f_bytes(1, "w-0") + f_bytes(
            3, f_int(1, 0) + f_int(5, 2)),
        "raw_status": b"\x05",
        "raw_define_model": b"\x06" + f_bytes(1, "job") + f_bytes(2, "d1") +
        f_bytes(3, f_bytes(1, "w") + f_int(2, 2)) + f_bytes(5, floats(1.0, 2.0)) +
        f_int(6, 1),
        "raw_model_values": b"\x07" + f_bytes(1, "job") + f_int(3, 2),
    }
    # PS sync, batch 2, 1 epoch of 4 samples: one worker trains it all.
    i = In(0x80, 0x01, 0x30)
    co_register(i)
    co_next(i, 0, False)
    for _ in range(3):
        co_next(i, 0, True)
    i.byte(2).byte(0).byte(0)  # heartbeat
    i.byte(5).byte(4)  # status, job
    i.byte(3).byte(0)  # leave
    seeds["sync_one_worker"] = i.bytes()
    # PS async, batch 4, epoch of 8, two workers.
    i = In(0x80, 0x23, 0x70)
    co_register(i)
    co_register(i)
    for _ in range(3):
        co_next(i, 0, False)
        co_next(i, 1, False)
        co_next(i, 0, True)
        co_next(i, 1, True)
    i.byte(5)
    seeds["async_two_workers"] = i.bytes()
    # Ring, batch 2, epoch of 4, digests: two members, one leaves mid-step.
    i = In(0x80, 0xC1, 0x38)
    co_register(i)
    co_register(i)
    co_next(i, 0, False)
    co_next(i, 1, False)
    co_next(i, 0, True)
    i.byte(3).byte(1)  # member 1 leaves
    co_next(i, 0, True)
    i.byte(2).byte(0).byte(0)
    co_next(i, 0, True)
    i.byte(5)
    seeds["ring_member_leaves"] = i.bytes()
    # Sync with a quorum and shards that fail every third finalize.
    i = In(0x80, 0x03, 0x81 | 0x30)
    co_register(i)
    co_register(i)
    for _ in range(4):
        co_next(i, 0, False)
        co_next(i, 1, False)
        co_next(i, 0, True)
        co_next(i, 1, True)
    i.byte(5)
    seeds["quorum_failing_shards"] = i.bytes()
    return seeds


# --- ring_peer_fuzz ------------------------------------------------------
def ring_seeds():
    hello = (f_bytes(1, "job") + f_int(2, 1) + f_int(3, 0) + f_int(4, 2) +
             f_bytes(5, "w0"))
    seeds = {
        "raw_exchange": b"\x00" + frames(
            f_bytes(1, hello) + f_int(2, 1) + f_bytes(5, floats(1.0, 2.0)),
            f_int(2, 1) + f_int(3, 1) + f_bytes(5, floats(3.0)),
            f_int(2, 2) + f_bytes(5, b"\x01\x02\x03") + f_int(6, 1)),
        "raw_getweights": b"\x01" + f_bytes(1, "job"),
    }
    i = In(0x80, 0x12)  # job set, 5 weights, 1 GiB limit
    # Exchange: hello (generation 1) + 2 messages.
    i.byte(0).byte(0x00).range(0, 12, 2)
    i.range(-2, 5, 1).range(-1, 4, 0).range(0, 4, 2).byte(0)
    i.range(-1, 3, 1).range(-1, 3, 0).range(-1, 3, 0).byte(0x10)
    i.raw(floats(1.0, 2.0))
    i.byte(0).range(-1, 3, 1).range(-1, 3, 1).range(-1, 3, 0).byte(0x08)
    i.raw(floats(3.0))
    i.byte(3).byte(0).range(-2, 5, 1).range(-1, 3, 1).range(-1, 3, 0)
    i.range(-1, 3, 0)  # take (1, 0, 0)
    i.byte(2).byte(0).byte(0).range(-1, 3, 0)  # GetWeights
    # A stream of generation 2 (drops generation 1), then a stale one.
    i.byte(0).byte(0x00).range(0, 12, 1)
    i.range(-2, 5, 2).range(-1, 4, 1).range(0, 4, 2).byte(1)
    i.range(-1, 3, 0).range(-1, 3, 0).range(-1, 3, 0).byte(0x00)
    i.byte(1).byte(0x00).range(0, 12, 1)
    i.range(-2, 5, 1).range(-1, 4, 1).range(0, 4, 2).byte(1)
    i.range(-1, 3, 0).range(-1, 3, 0).range(-1, 3, 0).byte(0x00)
    i.byte(3).byte(2).range(-2, 5, 2).byte(0).byte(0).byte(0)  # Fail
    seeds["exchange_generations"] = i.bytes()
    # 4 KiB mailbox, no weights published: RESOURCE_EXHAUSTED, UNAVAILABLE.
    i = In(0x80, 0x08)
    i.byte(0).byte(0x00).range(0, 12, 2)
    i.range(-2, 5, 0).range(-1, 4, 0).range(0, 4, 2).byte(0)
    i.range(-1, 3, 0).range(-1, 3, 0).range(-1, 3, 0).byte(0xFF).int(3000, 2)
    i.byte(0).range(-1, 3, 0).range(-1, 3, 0).range(-1, 3, 1).byte(0xFF)
    i.int(3000, 2)
    i.byte(2).byte(0).byte(0).range(-1, 3, 0)
    seeds["mailbox_full"] = i.bytes()
    # Weights just over one 256 Ki-element chunk: two GetWeights chunks.
    seeds["weights_two_chunks"] = In(0x80, 0x30 | 0x02).byte(2).byte(0).byte(
        0).range(-1, 3, 0).bytes()
    return seeds


# --- checkpoint_reader_fuzz ----------------------------------------------
def checkpoint_body(job="job", shard=0, num_shards=2, begin=0, params=(),
                    state=(), version=3, steps=3):
    n = len(params)
    body = b"FERRYCKP" + struct.pack("<I", 1)
    body += struct.pack("<I", len(job)) + job.encode()
    body += struct.pack("<iiqqqqIQ", shard, num_shards, begin, begin + n,
                        version, steps, len(state), n)
    body += floats(*params)
    for buf in state:
        body += floats(*buf)
    return body


def with_crc(body):
    return body + struct.pack("<I", zlib.crc32(body))


def checkpoint_seeds():
    sgd = checkpoint_body(params=(1.0, 2.0))
    adam = checkpoint_body(params=(1.0, -2.0, 0.5), state=((0.1, 0.2, 0.3),
                                                           (1.0, 1.0, 1.0)),
                           begin=4, version=7, steps=7)
    momentum = checkpoint_body(job="a-longer-job-id", shard=1, num_shards=3,
                               params=(0.0,), state=((0.0,),))
    seeds = {
        "sgd": b"\x00" + with_crc(sgd),
        "adam": b"\x00" + with_crc(adam),
        "empty_slice": b"\x00" + with_crc(checkpoint_body()),
        "sgd_nocrc": b"\x01" + sgd,
        "adam_nocrc": b"\x01" + adam,
        "momentum_nocrc": b"\x01" + momentum,
        "bad_magic": b"\x00" + with_crc(b"FERRYCKQ" + sgd[8:]),
        "roundtrip": b"\x03" + In().frame(b"job").int(1, 4).int(2, 4).int(
            0, 8).range(0, 64, 2).int(5, 8).int(5, 8).raw(floats(
                1.0, 2.0)).range(0, 2, 1).raw(floats(0.5, 0.5)).bytes(),
    }
    # A directory: versions 1 (good), 2 (good), 3 (corrupt), a foreign name.
    i = In(0x02).range(0, 4, 2)
    i.byte(0x00).range(0, 9, 1).frame(with_crc(checkpoint_body(
        params=(1.0, 2.0), version=1, steps=1)))
    i.byte(0x01).range(0, 9, 2).frame(checkpoint_body(
        params=(3.0, 4.0), version=2, steps=2))
    i.byte(0x00).range(0, 9, 3).frame(with_crc(sgd)[:-1])
    i.byte(0xFF).frame(b"shard-0-v000000000004.ckpt.tmp").frame(b"x")
    i.range(-1, 10, 2).range(-1, 10, 1)
    seeds["store"] = i.bytes()
    return seeds


# --- idx_reader_fuzz -----------------------------------------------------
def idx(rank_dims, data):
    header = bytes([0, 0, 8, len(rank_dims)])
    header += b"".join(struct.pack(">I", d) for d in rank_dims)
    return header + data


def idx_seeds():
    labels = idx([4], bytes([0, 1, 2, 9]))
    images = idx([2, 2, 3], bytes(range(12)))
    return {
        "labels": b"\x00" + labels,
        "images": b"\x01" + images,
        "labels_gz": b"\x00" + gzip.compress(labels, mtime=0),
        "images_gz_two_members": b"\x01" + gzip.compress(
            images[:10], mtime=0) + gzip.compress(images[10:], mtime=0),
        "images_wrap_gzip": b"\x41" + b"\x00\x00" + images,
        "labels_wrap_gzip_cut": b"\x60" + b"\x0b\x00" + labels,
        "rank2": b"\x90" + idx([2, 2], bytes(4)),
        "empty_images": b"\x01" + idx([0, 28, 28], b""),
    }


# --- criteo_reader_fuzz --------------------------------------------------
def criteo_line(label, ids, dense_missing=()):
    dense = ["" if j in dense_missing else str(j * 3 - 1) for j in range(13)]
    cats = ["" if i is None else "%08x" % i for i in ids]
    return "\t".join([str(label)] + dense + cats).encode()


def criteo_seeds():
    ids = [0x68FD1E64 + k for k in range(26)]
    good = b"\n".join(criteo_line(k % 2, ids[k:] + ids[:k], (k,))
                      for k in range(4)) + b"\n"
    holes = criteo_line(1, [None] * 26, range(13)) + b"\r\n"
    return {
        "plain": b"\x00" + good,
        "small_blocks": b"\x04" + good + holes,
        "short_lines": b"\x18" + good,
        "gzip_wrapped": b"\x01" + b"\x00\x00" + good,
        "gzip_cut": b"\x03" + b"\x40\x00" + good,
        "mixed": b"\x00" + good + b"garbage\n\n" + holes,
    }


TARGETS = {
    "ps_service_fuzz": ps_seeds,
    "coordinator_service_fuzz": coordinator_seeds,
    "ring_peer_fuzz": ring_seeds,
    "checkpoint_reader_fuzz": checkpoint_seeds,
    "idx_reader_fuzz": idx_seeds,
    "criteo_reader_fuzz": criteo_seeds,
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus")
    for target, make in TARGETS.items():
        folder = os.path.join(out, target)
        os.makedirs(folder, exist_ok=True)
        seeds = make()
        for name, data in sorted(seeds.items()):
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        print("%s: %d seeds" % (target, len(seeds)))


if __name__ == "__main__":
    main()
