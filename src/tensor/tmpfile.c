/*
 * tmpfile.c: the temporary beside a file that is written whole and then
 * renamed over it (.npy outputs, `relayc fmt -o`, checkpoints). Its name is
 * unpredictable (mkstemp's six random characters) and it is created with
 * O_CREAT|O_EXCL, which never follows a symbolic link: a link planted in a
 * shared directory cannot make relayc write through it. Writing, syncing
 * and renaming are the callers'.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "relayc/base.h"

ry_status ry_tmpfile_create(const char *path, char *tmp, size_t n, int *fd, ry_error *err) {
    *fd = -1;
    /* the pid lets a sweep tell a dead run's temporary from a live one's */
    if (snprintf(tmp, n, "%s.tmp.%ld.XXXXXX", path, (long)getpid()) >= (int)n)
        return ry_error_file(err, path, "the path is too long for a temporary file");
    int f = mkostemp(tmp, O_CLOEXEC);
    if (f < 0) return ry_error_file(err, path, "cannot create a temporary file beside it: %s", strerror(errno));
    /* mkstemp makes it 0600; what it becomes is an ordinary output file */
    if (fchmod(f, 0644) != 0) {
        int e = errno;
        close(f);
        unlink(tmp);
        return ry_error_file(err, tmp, "cannot set its mode: %s", strerror(e));
    }
    *fd = f;
    return RY_OK;
}
