#include "common/file_system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

absl::Status ErrnoError(int error, absl::string_view what,
                        const std::string& path) {
  const std::string message =
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Closes the descriptor on every path out of a scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now; returns the errno of a failed close, else 0.
  int Close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
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

  // Temp file, (fsync), rename, (fsync of the directory).
  static absl::Status Replace(const std::string& path,
                              absl::string_view contents, bool sync) {
    const std::string temp = path + ".tmp";
    {
      Fd fd(
          ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (fd.get() < 0) return ErrnoError(errno, "create", temp);
      const char* p = contents.data();
      size_t left = contents.size();
      while (left > 0) {
        const ssize_t n = ::write(fd.get(), p, left);
        if (n < 0) {
          if (errno == EINTR) continue;
          const int error = errno;
          ::unlink(temp.c_str());
          return ErrnoError(error, "write", temp);
        }
        p += n;
        left -= static_cast<size_t>(n);
      }
      if (sync && ::fsync(fd.get()) != 0) {
        const int error = errno;
        ::unlink(temp.c_str());
        return ErrnoError(error, "fsync", temp);
      }
      if (const int error = fd.Close(); error != 0) {
        ::unlink(temp.c_str());
        return ErrnoError(error, "close", temp);
      }
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      const int error = errno;
      ::unlink(temp.c_str());
      return ErrnoError(error, "rename to", path);
    }
    if (!sync) return absl::OkStatus();
    // The rename is durable once the directory entry is.
    const std::string dir = Parent(path);
    Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir_fd.get() < 0) return ErrnoError(errno, "open directory", dir);
    if (::fsync(dir_fd.get()) != 0) {
      return ErrnoError(errno, "fsync directory", dir);
    }
    return absl::OkStatus();
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

}  // namespace

FileSystem* PosixFileSystem() {
  static Posix* const fs = new Posix();
  return fs;
}

absl::Status InMemoryFileSystem::WriteFileAtomically(
    const std::string& path, absl::string_view contents) {
  absl::MutexLock lock(&mu_);
  if (!fail_writes_.ok()) return fail_writes_;
  files_[path] = std::string(contents);
  dirs_.insert(Parent(path));
  ++writes_;
  return absl::OkStatus();
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
    if (Parent(path) == dir) names.push_back(path.substr(dir.size() + 1));
  }
  return names;
}

absl::Status InMemoryFileSystem::DeleteFile(const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (files_.erase(path) == 0) {
    return absl::NotFoundError(absl::StrCat("cannot delete ", path));
  }
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
  files_[path] = std::move(contents);
  dirs_.insert(Parent(path));
}

int64_t InMemoryFileSystem::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

}  // namespace ferry
