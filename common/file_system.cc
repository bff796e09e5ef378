#include "common/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/posix_io.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

// Writes "<path>.tmp" through a buffer, then (fsync), rename, (fsync of the
// directory). The temp file is removed on every way out but a commit.
class PosixAtomicFile final : public AtomicFile {
 public:
  static absl::StatusOr<std::unique_ptr<AtomicFile>> Open(
      const std::string& path, bool sync) {
    std::string temp = path + ".tmp";
    const int fd =
        ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError(errno, "create", temp);
    return std::unique_ptr<AtomicFile>(
        new PosixAtomicFile(path, std::move(temp), fd, sync));
  }

  ~PosixAtomicFile() override {
    if (fd_.get() >= 0) fd_.Close();
    if (!committed_) ::unlink(temp_.c_str());
  }

  absl::Status Append(absl::string_view bytes) override {
    if (!status_.ok()) return status_;
    if (bytes.size() <= kBufferSize - buffer_.size()) {
      buffer_.append(bytes.data(), bytes.size());
      return absl::OkStatus();
    }
    if (absl::Status s = Flush(); !s.ok()) return s;
    if (bytes.size() < kBufferSize) {
      buffer_.append(bytes.data(), bytes.size());
      return absl::OkStatus();
    }
    return WriteAll(bytes);
  }

  absl::Status Commit() override {
    if (!status_.ok()) return status_;
    if (committed_ || fd_.get() < 0) {
      return Fail(absl::FailedPreconditionError(
          absl::StrCat("atomic file ", path_, " committed twice")));
    }
    if (absl::Status s = Flush(); !s.ok()) return s;
    if (sync_ && ::fsync(fd_.get()) != 0) {
      return Fail(ErrnoError(errno, "fsync", temp_));
    }
    if (const int error = fd_.Close(); error != 0) {
      return Fail(ErrnoError(error, "close", temp_));
    }
    if (::rename(temp_.c_str(), path_.c_str()) != 0) {
      return Fail(ErrnoError(errno, "rename to", path_));
    }
    committed_ = true;
    if (!sync_) return absl::OkStatus();
    // The rename is durable once the directory entry is.
    return SyncDirectoryOf(path_);
  }

 private:
  // Appends of at least this much go to the file directly.
  static constexpr size_t kBufferSize = size_t{1} << 20;

  PosixAtomicFile(std::string path, std::string temp, int fd, bool sync)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd), sync_(sync) {
    buffer_.reserve(kBufferSize);
  }

  absl::Status Fail(absl::Status status) {
    status_ = status;
    return status;
  }
  absl::Status Flush() {
    const absl::Status s = WriteAll(buffer_);
    buffer_.clear();
    return s;
  }
  absl::Status WriteAll(absl::string_view bytes) {
    const char* p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      const ssize_t n = ::write(fd_.get(), p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Fail(ErrnoError(errno, "write", temp_));
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  const std::string path_;
  const std::string temp_;
  Fd fd_;
  const bool sync_;
  std::string buffer_;
  absl::Status status_;
  bool committed_ = false;
};

// FileSystem::NewAtomicFile's default: the bytes in memory, written whole.
class GatheredAtomicFile final : public AtomicFile {
 public:
  GatheredAtomicFile(FileSystem* fs, std::string path)
      : fs_(fs), path_(std::move(path)) {}

  absl::Status Append(absl::string_view bytes) override {
    contents_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  absl::Status Commit() override {
    if (committed_) {
      return absl::FailedPreconditionError(
          absl::StrCat("atomic file ", path_, " committed twice"));
    }
    committed_ = true;
    return fs_->WriteFileAtomically(path_, contents_);
  }

 private:
  FileSystem* const fs_;
  const std::string path_;
  std::string contents_;
  bool committed_ = false;
};

// MapFile's default: a copy of the file.
class CopiedFile final : public MappedFile {
 public:
  explicit CopiedFile(std::string contents)
      : MappedFile({}), contents_(std::move(contents)) {
    set_bytes(contents_);
  }

 private:
  std::string contents_;
};

// A file mapped read-only and private: never written, so a released page
// is read from the file (the page cache) again when touched.
class PosixMappedFile final : public MappedFile {
 public:
  PosixMappedFile(void* base, size_t size)
      : MappedFile(absl::string_view(static_cast<const char*>(base), size)),
        base_(base),
        size_(size) {}
  ~PosixMappedFile() override {
    if (size_ > 0) ::munmap(base_, size_);
  }
  void Release(absl::string_view part) override {
    if (part.empty() || size_ == 0) return;
    static const uintptr_t page =
        static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t base = reinterpret_cast<uintptr_t>(base_);
    const uintptr_t first = reinterpret_cast<uintptr_t>(part.data());
    // Only ever pages of this mapping: MADV_DONTNEED on other memory would
    // zero it.
    if (first < base || part.size() > size_ ||
        first - base > size_ - part.size()) {
      return;
    }
    // A read fault maps cached pages around it too: the fault-around
    // window, and the whole of a large page-cache folio (up to 2 MiB),
    // also pages released just before. A reader that releases what it has
    // read, part by part, would leave those behind unless each release
    // reaches back that far.
    constexpr uintptr_t kFaultAround = uintptr_t{2} << 20;
    const uintptr_t begin =
        (first - base > kFaultAround ? first - kFaultAround : base) &
        ~(page - 1);
    const uintptr_t end =
        std::min((first + part.size() + page - 1) & ~(page - 1), base + size_);
    if (end > begin) {
      // Advice only: a failure leaves the pages resident, nothing else.
      ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
  }

 private:
  void* const base_;
  const size_t size_;
};

class Posix final : public FileSystem {
 public:
  absl::Status WriteFileAtomically(const std::string& path,
                                   absl::string_view contents) override {
    return Replace(path, contents, /*sync=*/true);
  }
  absl::Status ReplaceFile(const std::string& path,
                           absl::string_view contents) override {
    return Replace(path, contents, /*sync=*/false);
  }
  absl::Status SyncFile(const std::string& path) override {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoError(errno, "open", path);
    if (::fsync(fd.get()) != 0) return ErrnoError(errno, "fsync", path);
    return SyncDirectoryOf(path);
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> NewAtomicFile(
      const std::string& path) override {
    return PosixAtomicFile::Open(path, /*sync=*/true);
  }
  absl::StatusOr<std::unique_ptr<AtomicFile>> NewScratchFile(
      const std::string& path) override {
    return PosixAtomicFile::Open(path, /*sync=*/false);
  }
  absl::StatusOr<std::unique_ptr<RewritableFile>> OpenRewritable(
      const std::string& path) override {
    return OpenPosixRewritableFile(path);
  }

  static absl::Status Replace(const std::string& path,
                              absl::string_view contents, bool sync) {
    absl::StatusOr<std::unique_ptr<AtomicFile>> file =
        PosixAtomicFile::Open(path, sync);
    if (!file.ok()) return file.status();
    if (absl::Status s = (*file)->Append(contents); !s.ok()) return s;
    return (*file)->Commit();
  }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoError(errno, "open", path);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "stat", path);
    std::string contents;
    contents.reserve(static_cast<size_t>(std::max<off_t>(st.st_size, 0)));
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoError(errno, "read", path);
      }
      if (n == 0) break;
      contents.append(buffer, static_cast<size_t>(n));
    }
    return contents;
  }

  absl::StatusOr<std::unique_ptr<MappedFile>> MapFile(
      const std::string& path) override {
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return ErrnoError(errno, "open", path);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "stat", path);
    const size_t size = static_cast<size_t>(std::max<off_t>(st.st_size, 0));
    if (size == 0) return std::make_unique<PosixMappedFile>(nullptr, 0);
    void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (base == MAP_FAILED) {
      // A file system that cannot map (or no address space): a copy.
      return FileSystem::MapFile(path);
    }
    // Read front to back: aggressive readahead, and pages behind the
    // reader may go first.
    ::madvise(base, size, MADV_SEQUENTIAL);
    return std::make_unique<PosixMappedFile>(base, size);
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(
      const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoError(errno, "list directory", dir);
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    const int error = errno;
    ::closedir(d);
    if (error != 0) return ErrnoError(error, "list directory", dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoError(errno, "delete", path);
    return absl::OkStatus();
  }

  absl::Status CreateDirectories(const std::string& dir) override {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) return ErrnoError(error.value(), "create directory", dir);
    return absl::OkStatus();
  }
};

// FileSystem::OpenRewritable's default: each rewrite a replacement.
class ReplacingRewritableFile final : public RewritableFile {
 public:
  ReplacingRewritableFile(FileSystem* fs, std::string path)
      : fs_(fs), path_(std::move(path)) {}
  absl::Status Rewrite(absl::string_view contents) override {
    return fs_->ReplaceFile(path_, contents);
  }
  absl::Status Sync() override { return fs_->SyncFile(path_); }

 private:
  FileSystem* const fs_;
  const std::string path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RewritableFile>> FileSystem::OpenRewritable(
    const std::string& path) {
  return std::unique_ptr<RewritableFile>(
      new ReplacingRewritableFile(this, path));
}

absl::StatusOr<std::unique_ptr<AtomicFile>> FileSystem::NewAtomicFile(
    const std::string& path) {
  return std::unique_ptr<AtomicFile>(new GatheredAtomicFile(this, path));
}

absl::Status FileSystem::SyncFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string contents, ReadFile(path));
  return WriteFileAtomically(path, contents);
}

absl::StatusOr<std::unique_ptr<MappedFile>> FileSystem::MapFile(
    const std::string& path) {
  absl::StatusOr<std::string> contents = ReadFile(path);
  if (!contents.ok()) return contents.status();
  return std::make_unique<CopiedFile>(*std::move(contents));
}

FileSystem* PosixFileSystem() {
  static Posix* const fs = new Posix();
  return fs;
}

absl::Status InMemoryFileSystem::WriteFileAtomically(
    const std::string& path, absl::string_view contents) {
  RETURN_IF_ERROR(ReplaceFile(path, contents));
  absl::MutexLock lock(&mu_);
  durable_[path] = files_[path];
  return absl::OkStatus();
}

absl::Status InMemoryFileSystem::ReplaceFile(const std::string& path,
                                             absl::string_view contents) {
  absl::MutexLock lock(&mu_);
  if (!fail_writes_.ok()) return fail_writes_;
  files_[path] = std::string(contents);
  dirs_.insert(ParentDirectory(path));
  ++writes_;
  return absl::OkStatus();
}

absl::Status InMemoryFileSystem::SyncFile(const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot sync ", path));
  }
  durable_[path] = it->second;
  ++syncs_;
  return absl::OkStatus();
}

int64_t InMemoryFileSystem::syncs() const {
  absl::MutexLock lock(&mu_);
  return syncs_;
}

std::unique_ptr<InMemoryFileSystem> InMemoryFileSystem::AfterMachineCrash()
    const {
  auto crashed = std::make_unique<InMemoryFileSystem>();
  absl::MutexLock lock(&mu_);
  absl::MutexLock crashed_lock(&crashed->mu_);
  crashed->files_ = durable_;
  crashed->durable_ = durable_;
  crashed->dirs_ = dirs_;
  return crashed;
}

// Gathers the bytes; stores them on Commit under the file system's rules.
class InMemoryFileSystem::File final : public AtomicFile {
 public:
  File(InMemoryFileSystem* fs, std::string path)
      : fs_(fs), path_(std::move(path)) {}

  absl::Status Append(absl::string_view bytes) override {
    if (!status_.ok()) return status_;
    status_ = fs_->ChargeAppend(static_cast<int64_t>(bytes.size()));
    if (status_.ok()) contents_.append(bytes.data(), bytes.size());
    return status_;
  }
  absl::Status Commit() override {
    if (!status_.ok()) return status_;
    status_ = absl::FailedPreconditionError(
        absl::StrCat("atomic file ", path_, " committed twice"));
    return fs_->WriteFileAtomically(path_, contents_);
  }

 private:
  InMemoryFileSystem* const fs_;
  const std::string path_;
  std::string contents_;
  absl::Status status_;
};

absl::StatusOr<std::unique_ptr<AtomicFile>> InMemoryFileSystem::NewAtomicFile(
    const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (!fail_writes_.ok()) return fail_writes_;
  return std::unique_ptr<AtomicFile>(new File(this, path));
}

absl::Status InMemoryFileSystem::ChargeAppend(int64_t n) {
  absl::MutexLock lock(&mu_);
  if (!fail_writes_.ok()) return fail_writes_;
  if (append_budget_ < 0) return absl::OkStatus();
  if (n > append_budget_) {
    append_budget_ = 0;
    return absl::ResourceExhaustedError(
        "cannot write: no space left on the in-memory device");
  }
  append_budget_ -= n;
  return absl::OkStatus();
}

void InMemoryFileSystem::FailWritesAfter(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  append_budget_ = bytes;
}

absl::StatusOr<std::string> InMemoryFileSystem::ReadFile(
    const std::string& path) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(path);
  if (it == files_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  }
  return it->second;
}

absl::StatusOr<std::vector<std::string>> InMemoryFileSystem::ListDirectory(
    const std::string& dir) {
  absl::MutexLock lock(&mu_);
  if (!dirs_.contains(dir)) {
    return absl::NotFoundError(absl::StrCat("cannot list directory ", dir));
  }
  std::vector<std::string> names;  // files_ is sorted, so names are too
  for (const auto& [path, contents] : files_) {
    if (ParentDirectory(path) == dir)
      names.push_back(path.substr(dir.size() + 1));
  }
  return names;
}

absl::Status InMemoryFileSystem::DeleteFile(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (files_.erase(path) == 0) {
    return absl::NotFoundError(absl::StrCat("cannot delete ", path));
  }
  durable_.erase(path);  // deletions are taken as durable at once
  return absl::OkStatus();
}

absl::Status InMemoryFileSystem::CreateDirectories(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  dirs_.insert(dir);
  return absl::OkStatus();
}

void InMemoryFileSystem::FailWrites(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_writes_ = std::move(status);
}

void InMemoryFileSystem::SetFileContents(const std::string& path,
                                         std::string contents) {
  absl::MutexLock lock(&mu_);
  durable_[path] = contents;
  files_[path] = std::move(contents);
  dirs_.insert(ParentDirectory(path));
}

int64_t InMemoryFileSystem::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

}  // namespace ferry
