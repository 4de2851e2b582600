/* oserr: musl's strerror wording for the errno values we report (see oserr.h). */
#include "util/oserr.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *oserr_text(int errnum)
{
    switch (errnum) {
    case EPERM: return "Operation not permitted";
    case ENOENT: return "No such file or directory";
    case ESRCH: return "No such process";
    case EINTR: return "Interrupted system call";
    case EIO: return "I/O error";
    case ENXIO: return "No such device or address";
    case E2BIG: return "Argument list too long";
    case ENOEXEC: return "Exec format error";
    case EBADF: return "Bad file descriptor";
    case ECHILD: return "No child process";
    case EAGAIN: return "Resource temporarily unavailable";
    case ENOMEM: return "Out of memory";
    case EACCES: return "Permission denied";
    case EFAULT: return "Bad address";
    case EBUSY: return "Resource busy";
    case EEXIST: return "File exists";
    case EXDEV: return "Cross-device link";
    case ENODEV: return "No such device";
    case ENOTDIR: return "Not a directory";
    case EISDIR: return "Is a directory";
    case EINVAL: return "Invalid argument";
    case ENFILE: return "Too many open files in system";
    case EMFILE: return "No file descriptors available";
    case ENOTTY: return "Not a tty";
    case ETXTBSY: return "Text file busy";
    case EFBIG: return "File too large";
    case ENOSPC: return "No space left on device";
    case ESPIPE: return "Invalid seek";
    case EROFS: return "Read-only file system";
    case EMLINK: return "Too many links";
    case EPIPE: return "Broken pipe";
    case ERANGE: return "Result not representable";
    case ENAMETOOLONG: return "Filename too long";
    case ENOSYS: return "Function not implemented";
    case ENOTEMPTY: return "Directory not empty";
    case ELOOP: return "Symbolic link loop";
    case EOVERFLOW: return "Value too large for data type";
    case ENOTSUP: return "Not supported";
    case ECANCELED: return "Operation canceled";
    case EDQUOT: return "Quota exceeded";
    default: return strerror(errnum);
    }
}

void oserr_format(int errnum, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s (os error %d)", oserr_text(errnum), errnum);
}
