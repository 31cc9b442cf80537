/*
 * libaclalloc_preload.so: the libc functions that `aclalloc run` takes in
 * front of libc (or a user, with LD_PRELOAD). They live here, in an object
 * that is loaded only when asked for, so that libaclalloc.so exports no libc
 * name and a program linked with -laclalloc keeps libc's own.
 *
 * - The exec family (execve, execv, execvp, execvpe, fexecve, execl, execle,
 *   execlp): the image about to be replaced writes its tracking reports
 *   first (aclallocTrackingBeforeExec in libaclalloc.so), as it would at
 *   exit; an exec that fails takes them back (aclallocTrackingExecFailed),
 *   with errno kept. glibc's execl, execle and execlp reach the kernel
 *   without a call that can be taken in their place, so they are taken too.
 * - Every exec, and posix_spawn and posix_spawnp: the new image gets the
 *   variables this process was started with (LD_PRELOAD and ACLALLOC_*),
 *   even when the caller passes an environment of its own, so the program it
 *   starts is tracked and reports too. A variable the caller's environment
 *   sets keeps the caller's value, except LD_PRELOAD, which gets this
 *   process's objects in front when it lacks them. system and popen start
 *   their shell with the process's environment, which carries them.
 *
 * Nothing here allocates: an exec may come from a forked child of a
 * multithreaded program, where only async-signal-safe calls are allowed.
 *
 * SPDX-License-Identifier: MIT OR Apache-2.0
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);
/* aclallocTrackingBeforeExec and aclallocTrackingExecFailed (aclError). */
typedef int32_t (*hook_fn)(void);

/* libc's functions, looked up at load: a forked child that execs must not
 * call dlsym, whose lock another thread may have held at the fork. */
static execve_fn next_execve;
static execve_fn next_execvpe;
static fexecve_fn next_fexecve;
static spawn_fn next_posix_spawn;
static spawn_fn next_posix_spawnp;

/* The process this object was loaded into (a forked child has another). */
static pid_t loaded_pid;

/* The variables this process was started with that its children keep:
 * pointers to environ's own strings at load, which glibc never frees. */
enum { MAX_KEPT = 32 };
static const char *kept[MAX_KEPT];
static size_t kept_count;

/* The length of the name of `entry` ("NAME=value"). */
static size_t name_length(const char *entry) { return strcspn(entry, "="); }

static int is_kept_name(const char *entry) {
    return strncmp(entry, "ACLALLOC_", 9) == 0 || strncmp(entry, "LD_PRELOAD=", 11) == 0;
}

/* The value-of-a-symbol idiom POSIX gives for dlsym. */
static void look_up(void *slot, const char *name) {
    void *found = dlsym(RTLD_NEXT, name);
    memcpy(slot, &found, sizeof found);
}

__attribute__((constructor)) static void at_load(void) {
    look_up(&next_execve, "execve");
    look_up(&next_execvpe, "execvpe");
    look_up(&next_fexecve, "fexecve");
    look_up(&next_posix_spawn, "posix_spawn");
    look_up(&next_posix_spawnp, "posix_spawnp");
    loaded_pid = getpid();
    for (char **entry = environ; entry != NULL && *entry != NULL; entry++)
        if (kept_count < MAX_KEPT && is_kept_name(*entry)) kept[kept_count++] = *entry;
}

/* --- The environment a new image gets --- */

static size_t count(char *const list[]) {
    size_t n = 0;
    while (list != NULL && list[n] != NULL) n++;
    return n;
}

/* The entry of `envp` with the name of `entry`, or NULL. */
static char *find(char *const envp[], const char *entry) {
    size_t n = name_length(entry);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
        if (strncmp(envp[i], entry, n) == 0 && envp[i][n] == '=') return envp[i];
    return NULL;
}

/* Room for an LD_PRELOAD that merges this process's with the caller's. */
enum { PRELOAD_ROOM = 8192 };

/* LD_PRELOAD as the caller's `theirs` with `ours`' objects in front, in
 * `room`; `theirs` itself when it holds them already or the two do not fit. */
static char *merged_preload(const char *ours, char *theirs, char room[PRELOAD_ROOM]) {
    const char *our_objects = ours + 11, *their_objects = theirs + 11;
    if (*our_objects == '\0' || strstr(their_objects, our_objects) != NULL) return theirs;
    size_t a = strlen(our_objects), b = strlen(their_objects);
    if (11 + a + 1 + b + 1 > PRELOAD_ROOM) return theirs;
    memcpy(room, "LD_PRELOAD=", 11);
    memcpy(room + 11, our_objects, a);
    room[11 + a] = ':';
    memcpy(room + 11 + a + 1, their_objects, b + 1);
    return room;
}

/* `envp` plus the kept variables it lacks, in `out` (room for
 * count(envp) + MAX_KEPT + 1 entries), LD_PRELOAD merged in `preload`. */
static char *const *with_kept(char *const envp[], char **out, char preload[PRELOAD_ROOM]) {
    size_t n = 0;
    const char *our_preload = NULL;
    for (size_t i = 0; i < kept_count; i++)
        if (strncmp(kept[i], "LD_PRELOAD=", 11) == 0) our_preload = kept[i];
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        int is_preload = strncmp(envp[i], "LD_PRELOAD=", 11) == 0;
        out[n++] = is_preload && our_preload ? merged_preload(our_preload, envp[i], preload)
                                             : envp[i];
    }
    for (size_t i = 0; i < kept_count; i++)
        if (find(envp, kept[i]) == NULL) out[n++] = (char *)kept[i];
    out[n] = NULL;
    return out;
}

/* --- Reports before an image is replaced --- */

/* libaclalloc.so's function `name`, when the library is loaded (linked,
 * preloaded, or opened with RTLD_LOCAL as ctypes does) and this is the
 * process this object was loaded into: a forked child writes no report
 * before its exec, and must not take the loader's lock. */
static hook_fn library_hook(const char *name) {
    if (getpid() != loaded_pid) return NULL;
    void *library = dlopen("libaclalloc.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (library == NULL) return NULL;
    hook_fn hook = NULL;
    void *found = dlsym(library, name);
    memcpy(&hook, &found, sizeof hook);
    dlclose(library);
    return hook;
}

enum how { BY_PATH, BY_SEARCH, BY_DESCRIPTOR };

/* Replaces the image (the real call `how`), with its reports written first
 * and the kept variables in the new environment. Returns only on failure,
 * with the call's errno (ENOSYS when libc lacks the function). */
static int replace_image(enum how how, const char *file, int fd, char *const argv[],
                         char *const envp[]) {
    char *merged[count(envp) + MAX_KEPT + 1];
    char preload[PRELOAD_ROOM];
    char *const *env = with_kept(envp, merged, preload);
    hook_fn before = library_hook("aclallocTrackingBeforeExec");
    if (before != NULL) before();
    int rc = -1;
    errno = ENOSYS;
    if (how == BY_PATH && next_execve != NULL) rc = next_execve(file, argv, env);
    if (how == BY_SEARCH && next_execvpe != NULL) rc = next_execvpe(file, argv, env);
    if (how == BY_DESCRIPTOR && next_fexecve != NULL) rc = next_fexecve(fd, argv, env);
    int error = errno;
    hook_fn failed = before != NULL ? library_hook("aclallocTrackingExecFailed") : NULL;
    if (failed != NULL) failed();
    errno = error;
    return rc;
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    return replace_image(BY_PATH, path, -1, argv, envp);
}

int execv(const char *path, char *const argv[]) {
    return replace_image(BY_PATH, path, -1, argv, environ);
}

int execvpe(const char *file, char *const argv[], char *const envp[]) {
    return replace_image(BY_SEARCH, file, -1, argv, envp);
}

int execvp(const char *file, char *const argv[]) {
    return replace_image(BY_SEARCH, file, -1, argv, environ);
}

int fexecve(int fd, char *const argv[], char *const envp[]) {
    return replace_image(BY_DESCRIPTOR, NULL, fd, argv, envp);
}

/* The execl forms: the arguments up to the NULL become an argv on the stack
 * (execle's environment follows the NULL), then `how` runs with it. */
static int replace_from_list(enum how how, const char *file, int environment_follows,
                             const char *first, va_list *list) {
    va_list counting;
    va_copy(counting, *list);
    size_t argc = 0;
    for (const char *a = first; a != NULL; a = va_arg(counting, const char *)) argc++;
    va_end(counting);
    char *argv[argc + 1];
    argv[0] = (char *)first;
    for (size_t i = 1; i <= argc; i++) argv[i] = va_arg(*list, char *);
    char *const *envp = environment_follows ? va_arg(*list, char *const *) : environ;
    return replace_image(how, file, -1, argv, envp);
}

int execl(const char *path, const char *arg, ...) {
    va_list list;
    va_start(list, arg);
    int rc = replace_from_list(BY_PATH, path, 0, arg, &list);
    va_end(list);
    return rc;
}

int execlp(const char *file, const char *arg, ...) {
    va_list list;
    va_start(list, arg);
    int rc = replace_from_list(BY_SEARCH, file, 0, arg, &list);
    va_end(list);
    return rc;
}

int execle(const char *path, const char *arg, ...) {
    va_list list;
    va_start(list, arg);
    int rc = replace_from_list(BY_PATH, path, 1, arg, &list);
    va_end(list);
    return rc;
}

/* --- posix_spawn --- */

static int spawn(spawn_fn next, pid_t *pid, const char *file,
                 const posix_spawn_file_actions_t *actions, const posix_spawnattr_t *attr,
                 char *const argv[], char *const envp[]) {
    if (next == NULL) return ENOSYS;
    char *merged[count(envp) + MAX_KEPT + 1];
    char preload[PRELOAD_ROOM];
    return next(pid, file, actions, attr, argv, with_kept(envp, merged, preload));
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    return spawn(next_posix_spawn, pid, path, actions, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    return spawn(next_posix_spawnp, pid, file, actions, attr, argv, envp);
}
