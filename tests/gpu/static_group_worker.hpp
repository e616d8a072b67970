// The test binary re-executed with --static-group-exit: a program that keeps a Group in a
// function-local static, built before anything else touched the driver, so the Group is
// destroyed at exit after the library's own lazily built statics. Exit status 0 when one call
// ran and the process then exited cleanly.
#pragma once

namespace arfuse::test {

int static_group_worker_main();

}  // namespace arfuse::test
