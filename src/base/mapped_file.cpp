#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

namespace pllm {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(Status::io_error, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return make_error(Status::io_error, path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Status::io_error, path + ": not a regular file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return make_error(Status::io_error, path + ": mmap failed: " + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);  // the mapping stays valid after close
  return f;
}

std::shared_ptr<MappedFile> MappedFile::from_bytes(std::span<const uint8_t> bytes, std::string path) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = std::move(path);
  f->size_ = bytes.size();
  f->heap_ = true;
  if (!bytes.empty()) {
    auto* p = static_cast<uint8_t*>(::operator new[](bytes.size(), std::align_val_t(64)));
    std::memcpy(p, bytes.data(), bytes.size());
    f->data_ = p;
  }
  return f;
}

void MappedFile::release(const uint8_t* p, size_t n) const {
  if (heap_) return;  // a heap copy's pages are not file-backed: dropping them loses the bytes
  if (!data_ || p < data_ || n == 0 || uint64_t(p - data_) > size_ || n > size_ - uint64_t(p - data_)) return;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (uintptr_t(p) + page - 1) / page * page, hi = (uintptr_t(p) + n) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

void MappedFile::will_need(const uint8_t* p, size_t n) {
  if (!p || n == 0) return;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t lo = uintptr_t(p) / page * page, hi = (uintptr_t(p) + n + page - 1) / page * page;
  ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_WILLNEED);
}

MappedFile::~MappedFile() {
  if (!data_) return;
  if (heap_)
    ::operator delete[](const_cast<uint8_t*>(data_), std::align_val_t(64));
  else
    ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace pllm
