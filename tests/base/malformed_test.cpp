// Malformed input for every point-cloud reader: each case is written to a real file, read through
// ReadPointCloudFile, and must fail with exactly the message given (which names the file and the
// problem) and the code given; a few go through the CLI as well, checking its exit code.
#include <gtest/gtest.h>

#include "dejaview/base/bytes.h"
#include "dejaview/base/drive.h"
#include "dejaview/base/file_util.h"
#include "testutil.h"

namespace dv {
namespace {

using Code = Status::Code;

struct Case {
  const char* file;     // written under a scratch directory; the extension picks the reader
  std::string content;  // the file's bytes
  Code code;
  std::string message;  // after "<path>"
};

std::string Records(int n, size_t bytes_each) { return std::string(size_t(n) * bytes_each, '\0'); }

const std::string kXyzi = "FIELDS x y z intensity\nSIZE 4 4 4 4\nTYPE F F F F\nCOUNT 1 1 1 1\n";

std::string Pcd(const std::string& fields, const std::string& size_lines, const char* data) {
  return "VERSION 0.7\n" + fields + size_lines + "DATA " + data + "\n";
}
std::string Wh(uint64_t n) {
  return "WIDTH " + std::to_string(n) + "\nHEIGHT 1\nPOINTS " + std::to_string(n) + "\n";
}

const char* const kPlyXyz = "property float x\nproperty float y\nproperty float z\n";
std::string Ply(const char* format, const std::string& elements) {
  return std::string("ply\nformat ") + format + " 1.0\n" + elements + "end_header\n";
}
std::string Vertex(uint64_t n) { return "element vertex " + std::to_string(n) + "\n" + kPlyXyz; }

std::vector<Case> Cases() {
  const Code kC = Code::kCorruption, kR = Code::kOutOfRange;
  return {
      // KITTI .bin
      {"bin_truncated.bin", std::string(17, 'x'), kC,
       ": size 17 is not a multiple of 16 bytes (x, y, z, reflectance float32)"},
      // PCD header
      {"pcd_empty.pcd", "", kC, ": header ends without a DATA line (not a PCD file?)"},
      {"pcd_garbage.pcd", "\x89PNG\r\n\x1a\n\x00\x00", kC,
       ":1: unknown header keyword '?PNG' (not a PCD v0.7 file?)"},
      {"pcd_no_data.pcd", "VERSION 0.7\n" + kXyzi + Wh(1), kC,
       ": header ends without a DATA line (not a PCD file?)"},
      {"pcd_version.pcd", "VERSION 0.5\n" + kXyzi + Wh(1) + "DATA ascii\n", kC,
       ":1: unsupported VERSION '0.5' (dejaview reads PCD v0.7)"},
      {"pcd_compressed.pcd", Pcd(kXyzi, Wh(1), "binary_compressed") + Records(1, 16), kC,
       ": offset " + std::to_string(Pcd(kXyzi, Wh(1), "binary_compressed").size() + 4) +
           ": decompressed size 0 is not the 16 bytes the fields and POINTS make"},
      {"pcd_data_kind.pcd", Pcd(kXyzi, Wh(1), "hex"), kC,
       ":9: DATA 'hex' is not ascii, binary or binary_compressed"},
      {"pcd_duplicate_key.pcd", Pcd(kXyzi, Wh(1) + "WIDTH 1\n", "ascii"), kC,
       ":9: WIDTH appears twice"},
      {"pcd_no_fields.pcd", "VERSION 0.7\n" + Wh(1) + "DATA ascii\n", kC,
       ": header has no FIELDS line"},
      {"pcd_no_width.pcd", Pcd(kXyzi, "POINTS 1\n", "ascii") + "1 2 3 4\n", kC,
       ": header has no WIDTH line"},
      // PCD fields
      {"pcd_unknown_type.pcd",
       Pcd("FIELDS x y z\nSIZE 4 4 4\nTYPE F F Q\nCOUNT 1 1 1\n", Wh(1), "ascii"), kC,
       ":4: field 'z': unknown TYPE 'Q' (expected I, U or F)"},
      {"pcd_half_float.pcd", Pcd("FIELDS x y z\nSIZE 4 4 2\nTYPE F F F\n", Wh(1), "ascii"), kC,
       ":3: field 'z': TYPE F with SIZE 2 is not supported (float is 4 or 8 bytes)"},
      {"pcd_size_3.pcd", Pcd("FIELDS x y z\nSIZE 4 4 3\nTYPE F F U\n", Wh(1), "ascii"), kC,
       ":3: field 'z': SIZE '3' is not 1, 2, 4 or 8"},
      {"pcd_size_entries.pcd",
       Pcd("FIELDS x y z intensity\nSIZE 4 4 4\nTYPE F F F F\n", Wh(1), "ascii"), kC,
       ":3: SIZE has 3 entries, FIELDS has 4"},
      {"pcd_count_zero.pcd",
       Pcd("FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 0 1\n", Wh(1), "ascii"), kC,
       ":5: field 'y': COUNT '0' is not an integer in [1, 65536]"},
      {"pcd_missing_z.pcd",
       Pcd("FIELDS x y intensity\nSIZE 4 4 4\nTYPE F F F\n", Wh(1), "ascii") + "1 2 3\n", kC,
       ": no field 'z' (x, y and z are required)"},
      {"pcd_count_x.pcd",
       Pcd("FIELDS x y z\nSIZE 4 4 4\nTYPE F F F\nCOUNT 2 1 1\n", Wh(1), "ascii"), kC,
       ": field 'x' has count 2, expected 1"},
      {"pcd_duplicate_field.pcd",
       Pcd("FIELDS x y z x\nSIZE 4 4 4 4\nTYPE F F F F\n", Wh(1), "ascii"), kC,
       ": field 'x' appears twice"},
      {"pcd_ring_float.pcd", Pcd("FIELDS x y z ring\nSIZE 4 4 4 4\nTYPE F F F F\n", Wh(1), "ascii"),
       kC, ": field 'ring' is float32, expected an integer type"},
      // PCD sizes
      {"pcd_points_mismatch.pcd",
       Pcd(kXyzi, "WIDTH 10\nHEIGHT 1\nPOINTS 12\n", "binary") + Records(12, 16), kC,
       ":8: POINTS 12 differs from WIDTH x HEIGHT = 10"},
      {"pcd_negative_width.pcd", Pcd(kXyzi, "WIDTH -5\nHEIGHT 1\n", "ascii"), kC,
       ":6: WIDTH must be one non-negative integer"},
      {"pcd_absurd_size.pcd",
       Pcd(kXyzi, "WIDTH 4294967295\nHEIGHT 4294967295\n", "binary") + Records(1, 16), kR,
       ": WIDTH 4294967295 x HEIGHT 4294967295 exceeds the limit of 16777216 points"},
      {"pcd_truncated_binary.pcd", Pcd(kXyzi, Wh(10), "binary") + Records(3, 16), kC,
       ": truncated: 10 points of 16 bytes need 160 bytes of data, the file has 48"},
      {"pcd_huge_points_binary.pcd", Pcd(kXyzi, Wh(16000000), "binary") + Records(1, 16), kC,
       ": truncated: 16000000 points of 16 bytes need 256000000 bytes of data, the file has 16"},
      {"pcd_huge_points_ascii.pcd", Pcd(kXyzi, Wh(16000000), "ascii") + "1 2 3 4\n", kC,
       ": truncated: 16000000 ascii points cannot fit in the 8 bytes after the header"},
      // PCD ascii body
      {"pcd_truncated_ascii.pcd",
       Pcd(kXyzi, Wh(3), "ascii") + "1.25 2.25 3.25 4.25\n5.25 6.25 7.25 8.25\n", kC,
       ": truncated: header declares 3 points, the data has 2"},
      {"pcd_value_count.pcd", Pcd(kXyzi, Wh(2), "ascii") + "1.25 2.25 3.25 4.25\n5 6 7\n", kC,
       ":11: point 1 has 3 values, expected 4"},
      {"pcd_bad_number.pcd", Pcd(kXyzi, Wh(1), "ascii") + "1 2 abc 4\n", kC,
       ":10: field 'z': 'abc' is not a valid float32"},
      {"pcd_ring_range_ascii.pcd",
       Pcd("FIELDS x y z ring\nSIZE 4 4 4 2\nTYPE F F F U\n", Wh(1), "ascii") + "1 2 3 70000\n", kC,
       ":9: field 'ring': '70000' is not a valid uint16"},
      {"pcd_ring_range_binary.pcd",
       Pcd("FIELDS x y z ring\nSIZE 4 4 4 4\nTYPE F F F I\n", Wh(1), "binary") +
           std::string(12, '\0') + std::string("\xff\xff\xff\xff", 4),
       kC, ": point 0: ring -1 does not fit uint16"},
      // PLY header
      {"ply_empty.ply", "", kC, ": not a PLY file (the first line must be 'ply')"},
      {"ply_garbage.ply", "PK\x03\x04zipzip", kC,
       ": not a PLY file (the first line must be 'ply')"},
      {"ply_no_format.ply", "ply\n" + Vertex(1) + "end_header\n", kC,
       ": header has no format line"},
      {"ply_big_endian.ply", Ply("binary_big_endian", Vertex(1)), kC,
       ":2: binary_big_endian is not supported (save as little-endian)"},
      {"ply_format_version.ply", "ply\nformat ascii 2.0\nend_header\n", kC,
       ":2: expected 'format ascii|binary_little_endian 1.0'"},
      {"ply_no_end_header.ply", "ply\nformat ascii 1.0\n" + Vertex(1), kC,
       ": header has no end_header line"},
      {"ply_unknown_keyword.ply", "ply\nformat ascii 1.0\nvertices 3\nend_header\n", kC,
       ":3: unknown header keyword 'vertices'"},
      {"ply_property_first.ply", "ply\nformat ascii 1.0\nproperty float x\nend_header\n", kC,
       ":3: property before any element"},
      {"ply_unknown_type.ply", Ply("ascii", "element vertex 1\nproperty half x\n"), kC,
       ":4: unknown property type 'half'"},
      {"ply_bad_element.ply", Ply("ascii", "element vertex many\n"), kC,
       ":3: expected 'element NAME COUNT'"},
      {"ply_duplicate_element.ply", Ply("ascii", Vertex(1) + Vertex(1)), kC,
       ":7: element 'vertex' appears twice"},
      {"ply_list_float_count.ply", Ply("ascii", "element face 1\nproperty list float int i\n"), kC,
       ":4: list count type 'float' is not an integer type"},
      {"ply_no_vertex.ply", Ply("ascii", "element face 0\nproperty list uchar int i\n"), kC,
       ": no 'vertex' element"},
      {"ply_missing_x.ply",
       Ply("ascii", "element vertex 1\nproperty float y\nproperty float z\n") + "1 2\n", kC,
       ": no field 'x' (x, y and z are required)"},
      {"ply_vertex_list.ply", Ply("ascii", Vertex(1) + "property list uchar int refs\n"), kC,
       ": vertex property 'refs' is a list (not supported)"},
      // PLY sizes
      {"ply_absurd_vertices.ply", Ply("binary_little_endian", Vertex(1000000000)), kR,
       ":3: element 'vertex' has 1000000000 rows, exceeds the limit of 16777216"},
      {"ply_absurd_rows.ply", Ply("binary_little_endian", "element face 99999999999\n"), kR,
       ":3: element 'face' has 99999999999 rows, exceeds the limit of 4294967296"},
      {"ply_truncated_binary.ply", Ply("binary_little_endian", Vertex(10)) + Records(3, 12), kC,
       ": truncated: 10 points of 12 bytes need 120 bytes of data, the file has 36"},
      {"ply_huge_vertices_ascii.ply", Ply("ascii", Vertex(16000000)) + "1 2 3\n", kC,
       ": truncated: 16000000 ascii points cannot fit in the 6 bytes after the header"},
      {"ply_face_truncated.ply",
       Ply("binary_little_endian", "element face 2\nproperty list uchar int i\n" + Vertex(1)) +
           "\x01" + std::string(4, '\0') + "\xff",
       kC, ": truncated: element 'face' ends in row 1 of 2"},
      {"ply_face_fixed_truncated.ply",
       Ply("binary_little_endian", "element edge 4\nproperty int a\nproperty int b\n" + Vertex(1)) +
           Records(3, 8),
       kC, ": truncated: element 'edge' needs 32 bytes, the file has 24"},
      {"ply_negative_list.ply",
       Ply("binary_little_endian", "element face 1\nproperty list char int i\n" + Vertex(0)) +
           "\xff",
       kC, ": element 'face' row 0: negative list length"},
      // PLY ascii body
      {"ply_truncated_ascii.ply", Ply("ascii", Vertex(3)) + "1.125 2.125 3.125\n", kC,
       ": truncated: header declares 3 points, the data has 1"},
      {"ply_value_count.ply", Ply("ascii", Vertex(1)) + "1 2 3 4\n", kC,
       ":8: point 0 has 4 values, expected 3"},
      {"ply_bad_value.ply", Ply("ascii", Vertex(1)) + "1 0x 3\n", kC,
       ":8: field 'y': '0x' is not a valid float32"},
      {"ply_face_extra.ply",
       Ply("ascii", "element face 1\nproperty list uchar int i\n" + Vertex(1)) + "2 0 1 7\n1 2 3\n",
       kC, ":10: element 'face' row has 1 extra values"},
      {"ply_face_short.ply",
       Ply("ascii", "element face 1\nproperty list uchar int i\n" + Vertex(1)) + "3 0 1\n1 2 3\n",
       kC, ":10: element 'face' row has too few values"},
      {"ply_face_negative.ply",
       Ply("ascii", "element face 1\nproperty list uchar int i\n" + Vertex(1)) + "-1\n1 2 3\n", kC,
       ":10: element 'face': list length is not a non-negative integer"},
  };
}

TEST(Malformed, EveryReaderNamesTheFileAndTheProblem) {
  const std::string dir = test::ScratchDir();
  for (const Case& c : Cases()) {
    const std::string path = dir + "/" + c.file;
    ASSERT_TRUE(WriteFileAtomic(path, c.content).ok());
    auto cloud = ReadPointCloudFile(path);
    ASSERT_FALSE(cloud.ok()) << c.file;
    EXPECT_EQ(cloud.status().message(), path + c.message) << c.file;
    EXPECT_EQ(cloud.status().code(), c.code) << c.file << ": " << cloud.status().ToString();
  }
}

TEST(Malformed, CliExitCodesSayWhatWentWrong) {
  const std::string dir = test::ScratchDir();
  const std::string bad = dir + "/bad.pcd";
  ASSERT_TRUE(WriteFileAtomic(bad, Pcd(kXyzi, Wh(10), "binary") + Records(3, 16)).ok());
  std::string out;
  EXPECT_EQ(test::RunCli("info " + bad, &out), 3);
  EXPECT_EQ(out,
            "dejaview info: corruption: " + bad +
                ": truncated: 10 points of 16 bytes need 160 bytes of data, the file has 48\n");
  EXPECT_EQ(test::RunCli("convert " + bad + " " + dir + "/out.ply", &out), 3) << out;
  EXPECT_EQ(test::RunCli("convert " + dir + "/missing.pcd " + dir + "/out.ply", &out), 1) << out;
  EXPECT_EQ(
      test::RunCli("convert " + test::FixturePath("kitti_tiny.bin") + " " + dir + "/out.xyz", &out),
      2)
      << out;
  EXPECT_NE(out.find("out.xyz: unknown point-cloud extension '.xyz'"), std::string::npos) << out;
}

TEST(Malformed, NonFiniteCoordinatesAreKeptAndReported) {
  const std::string dir = test::ScratchDir();
  const std::string path = dir + "/nan.pcd";
  ASSERT_TRUE(WriteFileAtomic(
                  path, Pcd(kXyzi, Wh(4), "ascii") + "1 2 3 4\nnan 0 0 1\n0 inf 0 1\n0 0 -inf 1\n")
                  .ok());
  auto cloud = ReadPointCloudFile(path);
  ASSERT_TRUE(cloud.ok()) << cloud.status().ToString();
  EXPECT_EQ(cloud->size(), 4u);
  EXPECT_EQ(RemoveNonFinite(&*cloud), 3u);
  std::string out;
  ASSERT_EQ(test::RunCli("info " + path, &out), 0) << out;
  EXPECT_NE(out.find("points:     4 (3 non-finite)"), std::string::npos) << out;
  EXPECT_NE(out.find("bounds:     x [1.000, 1.000]  y [2.000, 2.000]  z [3.000, 3.000] m"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace dv
