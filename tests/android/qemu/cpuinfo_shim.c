/* LD_PRELOAD shim for aarch64 programs under qemu-user: open("/proc/cpuinfo") opens the file
 * named by FARM_FAKE_CPUINFO instead.
 *
 * qemu-user before 8.2 passes the host's (x86) /proc/cpuinfo through, and the cpuinfo library
 * inside ONNX Runtime dereferences NULL when it finds no ARM processor there. A phone's kernel
 * shows an ARM one, which is what the fake file holds. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *redirect(const char *path) {
  const char *fake = getenv("FARM_FAKE_CPUINFO");
  return (fake && path && strcmp(path, "/proc/cpuinfo") == 0) ? fake : path;
}

int open(const char *path, int flags, ...) {
  static int (*real)(const char *, int, ...) = 0;
  if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
  va_list args;
  va_start(args, flags);
  int mode = (flags & O_CREAT) ? va_arg(args, int) : 0;
  va_end(args);
  return real(redirect(path), flags, mode);
}

int open64(const char *path, int flags, ...) {
  static int (*real)(const char *, int, ...) = 0;
  if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
  va_list args;
  va_start(args, flags);
  int mode = (flags & O_CREAT) ? va_arg(args, int) : 0;
  va_end(args);
  return real(redirect(path), flags, mode);
}

int openat(int dir, const char *path, int flags, ...) {
  static int (*real)(int, const char *, int, ...) = 0;
  if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
  va_list args;
  va_start(args, flags);
  int mode = (flags & O_CREAT) ? va_arg(args, int) : 0;
  va_end(args);
  return real(dir, redirect(path), flags, mode);
}
