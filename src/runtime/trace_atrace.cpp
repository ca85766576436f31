// AtraceWriter (declared in trace_log.h): systrace marker lines, one write() each, to
// trace_marker or a stand-in file.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <new>
#include <system_error>

#include "runtime/trace_log.h"

namespace pllm {

Result<std::unique_ptr<AtraceWriter>> AtraceWriter::open(const std::string& path) {
  // O_NONBLOCK only for the open itself: a FIFO with no reader would otherwise block forever.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return make_error(Status::io_error, "atrace: cannot open " + path + " for writing: " +
                                            std::error_code(errno, std::generic_category()).message());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))) {
    ::close(fd);
    return make_error(Status::io_error, "atrace: " + path + " is not a trace_marker-like file");
  }
  // A regular file (a stand-in, or tracefs's trace_marker, which ignores the offset) gets
  // O_APPEND so that lines from several threads follow each other instead of overwriting.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) {
    flags &= ~O_NONBLOCK;
    if (S_ISREG(st.st_mode)) flags |= O_APPEND;
    ::fcntl(fd, F_SETFL, flags);
  }
  std::unique_ptr<AtraceWriter> w(new (std::nothrow) AtraceWriter(fd, int(::getpid()), path));
  if (!w) {
    ::close(fd);
    return make_error(Status::out_of_memory, "atrace: cannot allocate");
  }
  return w;
}

Result<std::unique_ptr<AtraceWriter>> AtraceWriter::open_default() {
  auto tracefs = open(kTracefsMarker);
  if (tracefs.ok()) return tracefs;
  auto debugfs = open(kDebugfsMarker);
  if (debugfs.ok()) return debugfs;
  return make_error(Status::io_error, tracefs.error().message + "; " + debugfs.error().message);
}

AtraceWriter::~AtraceWriter() { ::close(fd_); }

bool AtraceWriter::begin(std::string_view name) { return write_line('B', name, std::nullopt); }
bool AtraceWriter::end() { return write_line('E', std::nullopt, std::nullopt); }
bool AtraceWriter::counter(std::string_view name, int64_t value) { return write_line('C', name, value); }
bool AtraceWriter::async_begin(std::string_view name, uint64_t cookie) {
  return write_line('S', name, int64_t(cookie));
}
bool AtraceWriter::async_end(std::string_view name, uint64_t cookie) { return write_line('F', name, int64_t(cookie)); }

bool AtraceWriter::write_line(char tag, std::optional<std::string_view> name, std::optional<int64_t> number) {
  // "|" + 20 digits of an int64 + "\n": what must still fit after the name.
  constexpr size_t kTailRoom = 22;
  char line[kMaxLine];
  char* p = line;
  char* const end = line + kMaxLine;
  *p++ = tag;
  *p++ = '|';
  p = std::to_chars(p, end, pid_).ptr;
  if (name) {
    *p++ = '|';
    const size_t room = size_t(end - p) - kTailRoom;
    const size_t n = std::min(name->size(), room);
    for (size_t i = 0; i < n; ++i) {
      const char c = (*name)[i];
      *p++ = (c == '|' || c == '\n' || c == '\r') ? '_' : c;
    }
  }
  if (number) {
    *p++ = '|';
    p = std::to_chars(p, end, *number).ptr;
  }
  *p++ = '\n';
  const auto len = size_t(p - line);
  ssize_t written;
  do {
    written = ::write(fd_, line, len);
  } while (written < 0 && errno == EINTR);
  if (written != ssize_t(len)) {
    errors_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  return true;
}

}  // namespace pllm
