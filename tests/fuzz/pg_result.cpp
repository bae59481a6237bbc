// libFuzzer target: tern::pg's copy of a libpq result into blocks of its own (src/pg/result.cpp: adopt, measure,
// copy_out; 16-bit offsets and lengths in blocks of 128 bytes to 8 KiB, a larger result kept as its PGresult) and
// the reads of a result either way (tern/pg/result.hpp). The result is built from the input with libpq's own calls
// (PQmakeEmptyPGresult, PQsetResultAttrs, PQsetvalue): up to 40 columns with names, types, formats, type
// modifiers and source columns, up to 200 rows, fields of up to 10 KiB or NULL, so that results fall on both
// sides of every block size. Checks: what reads back through pg::result is what was set, field by field (bytes,
// NULL, format, type) and column by column, with the counts of rows and columns; a field outside the result reads
// as absent.
#include <libpq-fe.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.hpp"
#include "tern/pg/result.hpp"

namespace {

namespace pg = tern::pg;
using namespace tern::fuzz;

// The input's bytes one after the other, then zeros.
class reader {
 public:
  explicit reader(std::string_view in) noexcept : in_(in) {}
  unsigned byte() noexcept { return at_ < in_.size() ? static_cast<unsigned char>(in_[at_++]) : 0u; }
  unsigned u16() noexcept { return byte() | byte() << 8; }

 private:
  std::string_view in_;
  std::size_t at_ = 0;
};

constexpr pg::oid types[] = {pg::oids::int4, pg::oids::int8, pg::oids::text, pg::oids::bytea, pg::oids::float8,
                             pg::oids::boolean, pg::oids::timestamptz, pg::oids::jsonb};

struct column_set {
  std::string name;
  pg::oid type;
  int format;
  int modifier;
  pg::oid table;
  int table_column;
};

struct field_set {
  bool null;
  std::string value;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  reader in(input);
  choices pick(input);

  const unsigned shape = in.byte();
  const int columns = 1 + static_cast<int>(shape % 4 == 0 ? in.byte() % 40 : in.byte() % 8);
  std::vector<column_set> cols;
  for (int c = 0; c < columns; ++c) {
    column_set col;
    const unsigned name_length = in.byte() % 24;
    for (unsigned k = 0; k < name_length; ++k) {
      const char ch = static_cast<char>(in.byte());
      if (ch != '\0') col.name.push_back(ch);  // a C string for libpq
    }
    col.type = types[in.byte() % std::size(types)];
    col.format = static_cast<int>(in.byte() & 1);
    col.modifier = static_cast<int>(in.u16()) - 1;
    col.table = in.u16();
    col.table_column = static_cast<int>(in.u16() % 1700);  // PostgreSQL allows 1664 columns
    cols.push_back(std::move(col));
  }
  const int rows = static_cast<int>(shape % 8 == 1 ? in.byte() % 200 : in.byte() % 12);
  // Field lengths: mostly short, some near the block sizes' edges, a few past the largest block.
  const std::size_t scale = 1 + pick.below(shape % 3 == 0 ? 48 : 2);
  std::vector<field_set> fields;
  for (int i = 0; i < rows; ++i) {
    for (int c = 0; c < columns; ++c) {
      const unsigned l = in.byte();
      field_set f;
      f.null = l == 255;
      if (!f.null) {
        const std::size_t n = l * scale + pick.below(2);
        f.value.reserve(n);
        for (std::size_t k = 0; k < n; ++k) f.value.push_back(static_cast<char>('a' + (k + i + c) % 26));
        if (!f.value.empty()) f.value[0] = static_cast<char>(in.byte());  // any byte, NUL included
      }
      fields.push_back(std::move(f));
    }
  }

  PGresult* built = PQmakeEmptyPGresult(nullptr, PGRES_TUPLES_OK);
  TERN_FUZZ_CHECK(built != nullptr);
  std::vector<PGresAttDesc> descs(cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c) {
    descs[c].name = const_cast<char*>(cols[c].name.c_str());
    descs[c].tableid = cols[c].table;
    descs[c].columnid = cols[c].table_column;
    descs[c].format = cols[c].format;
    descs[c].typid = cols[c].type;
    descs[c].typlen = -1;
    descs[c].atttypmod = cols[c].modifier;
  }
  TERN_FUZZ_CHECK(PQsetResultAttrs(built, columns, descs.data()) != 0);
  for (int i = 0; i < rows; ++i) {
    for (int c = 0; c < columns; ++c) {
      field_set& f = fields[static_cast<std::size_t>(i * columns + c)];
      char* value = f.null ? nullptr : f.value.data();
      TERN_FUZZ_CHECK(PQsetvalue(built, i, c, value, static_cast<int>(f.value.size())) != 0);
    }
  }

  const pg::result r(pg::detail::adopt(built));  // copied into a block and freed, or kept
  TERN_FUZZ_CHECK(r.size() == static_cast<std::size_t>(rows));
  TERN_FUZZ_CHECK(r.columns() == columns);
  for (int c = 0; c < columns; ++c) {
    const column_set& col = cols[static_cast<std::size_t>(c)];
    TERN_FUZZ_CHECK(r.column_name(c) == col.name);
    TERN_FUZZ_CHECK(r.column_type(c) == col.type);
    TERN_FUZZ_CHECK(r.column_format(c) == (col.format == 1 ? pg::format::binary : pg::format::text));
    TERN_FUZZ_CHECK(r.column_type_modifier(c) == col.modifier);
    TERN_FUZZ_CHECK(r.column_table(c) == col.table);
    TERN_FUZZ_CHECK(r.column_table_column(c) == col.table_column);
  }
  for (int i = 0; i < rows; ++i) {
    const pg::row row = r[static_cast<std::size_t>(i)];
    TERN_FUZZ_CHECK(row.columns() == columns);
    for (int c = 0; c < columns; ++c) {
      const field_set& want = fields[static_cast<std::size_t>(i * columns + c)];
      const pg::field got = row[c];
      TERN_FUZZ_CHECK(got.exists());
      TERN_FUZZ_CHECK(got.is_null() == want.null);
      if (!want.null) TERN_FUZZ_CHECK(got.raw() == want.value);
      const column_set& col = cols[static_cast<std::size_t>(c)];
      TERN_FUZZ_CHECK(got.type() == col.type);
      TERN_FUZZ_CHECK(got.fmt() == (col.format == 1 ? pg::format::binary : pg::format::text));
    }
    TERN_FUZZ_CHECK(!row[columns].exists());
    TERN_FUZZ_CHECK(!row[-1].exists());
  }
  TERN_FUZZ_CHECK(r.command_tag().empty());
  return 0;
}
