// Compiled by check_diagnostics.py with clang 18 or later, never run: which coroutine lifetime mistakes the
// compiler catches through the attributes on tern::task (clang::coro_return_type, clang::coro_lifetimebound).
// Lines marked `expect: dangling` must be diagnosed; `not-caught: dangling` marks mistakes clang misses (the guide
// says so, and spawn(ctx, callable, args...) is the cure); unmarked lines are right and must not warn.
#define TERN_CORO_LIFETIME_CHECKS 1  // the attributes are opt-in
#include <tern/tern.hpp>

#include <string>

using namespace std::chrono_literals;

tern::task<std::size_t> print_later(const std::string& text) {
  co_await tern::sleep_for(10ms);
  co_return text.size();
}

tern::task<void> forms(tern::io_context& ctx) {
  const std::string message = "hello";
  int n = 3;

  // Wrong: the task outlives the temporary string or the lambda object (its captures) it refers to.
  auto kept = print_later(std::string("temporary"));  // expect: dangling
  auto lambda_task = [message, n]() -> tern::task<void> { co_await tern::sleep_for(1ms * n); }();  // expect: dangling
  tern::spawn(ctx, print_later(std::string("temporary"))).detach();  // not-caught: dangling
  tern::spawn(ctx, [message]() -> tern::task<void> { co_await tern::sleep_for(1ms); }()).detach();  // not-caught: dangling

  // Right: awaited at once (the temporaries live until the end of the full expression), or spawned in the form
  // that keeps the callable and copies of the arguments.
  co_await print_later(std::string("temporary"));
  tern::spawn(ctx, print_later, std::string("temporary")).detach();
  tern::spawn(ctx, [message, n]() -> tern::task<void> { co_await tern::sleep_for(1ms * n); }).detach();
  auto named = print_later(message);  // refers to a named local that outlives it
  co_await std::move(named);
  co_await std::move(kept);
  co_await std::move(lambda_task);
}

// A function that returns a task without being a coroutine says so; the temporary it binds is diagnosed there too.
TERN_CORO_WRAPPER tern::task<std::size_t> wrapper() { return print_later(std::string("temporary")); }  // expect: return-stack-address

int main() {}
