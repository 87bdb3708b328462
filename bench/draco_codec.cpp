// Google Draco (Debian libdraco-dev) as a peer: its kd-tree point-cloud encoder with position
// quantisation swept over 8..14 bits. Draco quantises inside the frame's bounding cube, so the
// step is (largest extent) / (2^bits - 1) and the error per point is at most step * sqrt(3) / 2.
// Intensity, when coded, is a one-component generic attribute quantised to 8 bits.
#include "dejaview/bench/codec.h"

#ifdef DEJAVIEW_HAVE_DRACO
#include <draco/compression/decode.h>
#include <draco/compression/encode.h>
#include <draco/point_cloud/point_cloud_builder.h>

namespace dv::bench {
namespace {

class DracoCodec : public Codec {
 public:
  std::string name() const override { return "draco"; }
  std::string knob_name() const override { return "bits"; }
  std::vector<double> DefaultKnobs() const override { return {8, 9, 10, 11, 12, 13, 14}; }

  StatusOr<EncodedFrame> Encode(const PointCloud& frame, const Pose&, const FrameContext& context,
                                double knob) override {
    const int bits = int(knob);
    if (bits < 1 || bits > 30) return Status::InvalidArgument("draco: bits must be in 1..30");
    draco::PointCloudBuilder builder;
    builder.Start(uint32_t(frame.size()));
    const int pos = builder.AddAttribute(draco::GeometryAttribute::POSITION, 3, draco::DT_FLOAT32);
    builder.SetAttributeValuesForAllPoints(pos, frame.xyz.data(), sizeof(Eigen::Vector3f));
    if (context.intensity) {
      const int att = builder.AddAttribute(draco::GeometryAttribute::GENERIC, 1, draco::DT_FLOAT32);
      builder.SetAttributeValuesForAllPoints(att, frame.intensity.data(), sizeof(float));
    }
    std::unique_ptr<draco::PointCloud> pc = builder.Finalize(false);
    draco::Encoder encoder;
    encoder.SetAttributeQuantization(draco::GeometryAttribute::POSITION, bits);
    encoder.SetAttributeQuantization(draco::GeometryAttribute::GENERIC, 8);
    encoder.SetEncodingMethod(draco::POINT_CLOUD_KD_TREE_ENCODING);
    // draco_encoder's default compression level 7 is speed 10 - 7 = 3.
    encoder.SetSpeedOptions(3, 3);
    draco::EncoderBuffer buffer;
    const draco::Status s = encoder.EncodePointCloudToBuffer(*pc, &buffer);
    if (!s.ok()) return Status::InvalidArgument(std::string("draco: ") + s.error_msg());
    EncodedFrame out;
    out.bytes.assign(buffer.data(), buffer.data() + buffer.size());
    out.sections = {{"draco", out.bytes.size()}};
    return out;
  }

  StatusOr<DecodedCloud> Decode(const std::vector<uint8_t>& bytes) override {
    draco::DecoderBuffer buffer;
    buffer.Init(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    draco::Decoder decoder;
    auto decoded = decoder.DecodePointCloudFromBuffer(&buffer);
    if (!decoded.ok()) {
      return Status::Corruption(std::string("draco: ") + decoded.status().error_msg());
    }
    const std::unique_ptr<draco::PointCloud> pc = std::move(decoded).value();
    const draco::PointAttribute* pos = pc->GetNamedAttribute(draco::GeometryAttribute::POSITION);
    // GetMappedValue writes num_components values of the attribute's type: check both first.
    if (pos == nullptr || pos->num_components() != 3 || pos->data_type() != draco::DT_FLOAT32) {
      return Status::Corruption("draco: no float32 xyz position attribute");
    }
    const draco::PointAttribute* att = pc->GetNamedAttribute(draco::GeometryAttribute::GENERIC);
    if (att != nullptr && (att->num_components() != 1 || att->data_type() != draco::DT_FLOAT32)) {
      return Status::Corruption("draco: intensity attribute is not one float32");
    }
    DecodedCloud out;
    out.cloud.reserve(pc->num_points());
    for (draco::PointIndex i(0); i < pc->num_points(); ++i) {
      Eigen::Vector3f p;
      float v = 0;
      pos->GetMappedValue(i, p.data());
      if (att != nullptr) att->GetMappedValue(i, &v);
      out.cloud.push_back(p, v);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<Codec> MakeDracoCodec() { return std::make_unique<DracoCodec>(); }

}  // namespace dv::bench
#else
namespace dv::bench {
std::unique_ptr<Codec> MakeDracoCodec() { return nullptr; }
}  // namespace dv::bench
#endif
