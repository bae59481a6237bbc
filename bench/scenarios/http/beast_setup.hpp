// What every Boost.Beast scenario of tern-bench-http shares: the configuration Boost 1.74 needs here, checked.
//
// CMake defines, for the whole worker:
//   BOOST_BEAST_USE_STD_STRING_VIEW     Beast's string_view is std::string_view, the type the shared checks use;
//   BOOST_ASIO_HAS_CO_AWAIT=1, BOOST_ASIO_HAS_STD_COROUTINE=1
//                                       Boost.Asio 1.18 does not detect clang's C++20 coroutines by itself, and its
//                                       headers fail to compile under clang in C++20 without them.
// Boost.Asio lives in namespace boost::asio, standalone Asio in ::asio: the two never meet in one program, and this
// worker links neither Asio worker's sources.
#pragma once

#if !defined(BOOST_BEAST_USE_STD_STRING_VIEW)
#error "tern-bench-http is built with BOOST_BEAST_USE_STD_STRING_VIEW (set by bench/CMakeLists.txt)"
#endif

#include <boost/version.hpp>

static_assert(BOOST_VERSION >= 107400, "Boost.Beast from Boost 1.74 or later");
