// io_uring backend: one translation unit, read in parts (src/io_uring/).
//
// The backend is one class (io_uring/backend.hpp) whose member functions are split by concern: setup.ipp makes the
// ring and registers files and buffers, submission.ipp turns operations into SQEs, cancels them and wakes parked
// loops, completion.ipp is the loop's turn (the enter, and the dispatch of every CQE), multishot.ipp holds
// receive()'s and accept()'s multishot requests and the receive pool's provided-buffer ring.
//
// The parts are included here rather than compiled on their own (hence .ipp: the build compiles every .cpp below
// src/), and the class keeps internal linkage, so the compiler sees the whole backend at once, as it did when it was
// one file: a helper with one caller (a CQE handler, an SQE prep) is inlined into reap() or start() whatever part
// it is read in. Compiled as separate files, the same code made those helpers calls from one file to another (in
// the Release build, reap() 561 bytes that call the CQE handlers instead of 3075 with them inlined; start() 735
// instead of 2231, calling the preps). Marking the hot helpers always_inline would have moved their bodies into
// the header, out of the parts they belong to, and each new helper would need the same care; one translation unit
// generates the same code as the single file did, with no annotation.
//
// Operations get one SQE each, prepared in start() and submitted together by poll(): one io_uring_enter per loop
// turn both submits and reaps. A turn whose handlers run long submits early (io_context_options::submit_within:
// the loop calls flush() between handlers once the oldest SQE has waited that long), so that a send is not held
// back behind another connection's CPU work. A CQE's user_data is the io_op itself; reserved values mark the
// cancel requests (whose own completions carry no information), the wake-up poll on an eventfd, and wake-up
// messages.
#include "io_uring/backend.hpp"

#include "io_uring/setup.ipp"
#include "io_uring/submission.ipp"
#include "io_uring/completion.ipp"
#include "io_uring/multishot.ipp"
