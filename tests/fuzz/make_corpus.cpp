// make_corpus <folder>: writes the seed corpus of every fuzz target with
// halfgrad's own writers (save_safetensors, save_training_checkpoint,
// write_npy, and the IDX layout of data/idx.h, plain and gzip). The output
// is committed under tests/fuzz/corpus/<target>/; rerun it when a format
// changes:  build/cpu/tests/fuzz_make_corpus tests/fuzz/corpus
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "data/npy.h"
#include "nn/layers.h"
#include "nn/serialize.h"
#include "optim/checkpoint.h"

namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string idx_bytes(const std::vector<uint32_t>& dims) {
  std::string out{0, 0, 0x08, static_cast<char>(dims.size())};
  size_t n = 1;
  for (uint32_t d : dims) {
    for (int s = 24; s >= 0; s -= 8) out += static_cast<char>((d >> s) & 0xff);
    n *= d;
  }
  for (size_t i = 0; i < n; ++i) out += static_cast<char>(i * 7 % 256);
  return out;
}

std::string gzip_bytes(const std::string& raw) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, static_cast<uLong>(raw.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus <folder>\n");
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* t : {"safetensors", "checkpoint", "idx", "npy"}) fs::create_directories(root / t);

  // safetensors: several dtypes and ranks, an empty tensor, metadata.
  hg::nn::save_safetensors((root / "safetensors" / "seed_mixed").string(),
                           {{"w", hg::arange(6).reshape({2, 3})},
                            {"h", hg::arange(4, {.dtype = hg::kF16})},
                            {"b", hg::from_vector<bool>({true, false, true})},
                            {"i", hg::arange(3, {.dtype = hg::kI64})},
                            {"e", hg::zeros({0, 2})},
                            {"s", hg::scalar_tensor(2.5, {.dtype = hg::kBF16})}},
                           {{"format", "pt"}});
  hg::nn::save_safetensors((root / "safetensors" / "seed_empty").string(), {});

  // checkpoint: the fuzz harness's model (4-3-2 MLP, AdamW), before and after a step.
  {
    hg::Generator gen(1);
    auto model = std::make_shared<hg::nn::Sequential>(std::initializer_list<std::shared_ptr<hg::nn::Module>>{
        std::make_shared<hg::nn::Linear>(4, 3, true, &gen), std::make_shared<hg::nn::ReLU>(),
        std::make_shared<hg::nn::Linear>(3, 2, true, &gen)});
    hg::optim::AdamW opt(model->parameters(), {.lr = 1e-3});
    hg::optim::TrainingProgress p{.epoch = 1, .batch = 2, .global_step = 5, .scheduler_step = 5,
                                  .generator = gen.get_state(), .extra = {{"note", "seed"}}};
    hg::optim::save_training_checkpoint((root / "checkpoint" / "seed_fresh").string(), *model, opt, p);
    const hg::Tensor loss = hg::cross_entropy(model->forward(hg::randn({2, 4}, {}, &gen)),
                                              hg::from_vector<int64_t>({0, 1}));
    loss.backward();
    opt.step();
    hg::optim::save_training_checkpoint((root / "checkpoint" / "seed_stepped").string(), *model, opt, p);
  }

  // npy: every dtype the reader knows, ranks 0..3, an empty array.
  hg::data::write_npy((root / "npy" / "seed_f32").string(), hg::arange(6).reshape({2, 3}));
  hg::data::write_npy((root / "npy" / "seed_f16").string(), hg::arange(4, {.dtype = hg::kF16}));
  hg::data::write_npy((root / "npy" / "seed_i64_3d").string(), hg::arange(8, {.dtype = hg::kI64}).reshape({2, 2, 2}));
  hg::data::write_npy((root / "npy" / "seed_bool").string(), hg::from_vector<bool>({true, false}));
  hg::data::write_npy((root / "npy" / "seed_u8_scalar").string(), hg::scalar_tensor(7, {.dtype = hg::kU8}));
  hg::data::write_npy((root / "npy" / "seed_empty").string(), hg::zeros({0, 3}, {.dtype = hg::kF64}));

  // idx: the harness reads byte 0 as the mode (odd: gzip the rest itself;
  // even: the rest is the file), so each seed is a mode byte + a file.
  const std::string images = idx_bytes({3, 4, 4}), labels = idx_bytes({5});
  write_file(root / "idx" / "seed_plain_images", std::string(1, '\0') + images);
  write_file(root / "idx" / "seed_plain_labels", std::string(1, '\0') + labels);
  write_file(root / "idx" / "seed_gz_file", std::string(1, '\0') + gzip_bytes(images));
  write_file(root / "idx" / "seed_gz_mode", std::string(1, '\1') + images);
  write_file(root / "idx" / "seed_two_members", std::string(1, '\0') + gzip_bytes(images.substr(0, 10)) +
                                                    gzip_bytes(images.substr(10)));
  std::printf("wrote the seed corpus under %s\n", root.c_str());
  return 0;
}
