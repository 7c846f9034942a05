#include "cuda/fatbin_reader.h"

#include <cstdint>
#include <cstring>

namespace tessera {
namespace cuda {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50u;
constexpr uint16_t kEmCuda = 190;

// Little-endian reads that fail instead of reading past the end.
class Bytes {
 public:
  Bytes(const char* data, size_t size) : data_(data), size_(size) {}
  size_t size() const { return size_; }
  bool Has(uint64_t at, uint64_t n) const { return at <= size_ && n <= size_ - at; }
  uint64_t Le(uint64_t at, int n) const {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(data_[at + i])) << (8 * i);
    return v;
  }
  Bytes Slice(uint64_t at, uint64_t n) const { return Bytes(data_ + at, n); }
  const char* data() const { return data_; }

 private:
  const char* data_;
  size_t size_;
};

struct Section {
  std::string name;
  uint64_t name_at = 0;  // offset of the name in the section-name table
  uint64_t offset = 0, size = 0;
  bool has_data = false;
};

// Sections of an ELF64 little-endian file, with its e_machine and e_flags.
Status ReadElf(const Bytes& elf, std::vector<Section>* sections, uint16_t* machine, uint32_t* flags) {
  if (!elf.Has(0, 64) || std::memcmp(elf.data(), "\x7f" "ELF", 4) != 0) return InvalidArgument("not an ELF file");
  if (elf.Le(4, 1) != 2 || elf.Le(5, 1) != 1) return InvalidArgument("not a 64-bit little-endian ELF file");
  *machine = static_cast<uint16_t>(elf.Le(18, 2));
  *flags = static_cast<uint32_t>(elf.Le(48, 4));
  const uint64_t shoff = elf.Le(40, 8), entsize = elf.Le(58, 2), count = elf.Le(60, 2), names = elf.Le(62, 2);
  if (entsize < 64 || !elf.Has(shoff, entsize * count) || names >= count) {
    return InvalidArgument("ELF section headers out of bounds");
  }
  std::vector<Section> all(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t h = shoff + i * entsize;
    all[i].has_data = elf.Le(h + 4, 4) != 8;  // SHT_NOBITS has no bytes in the file
    all[i].offset = elf.Le(h + 24, 8);
    all[i].size = elf.Le(h + 32, 8);
    if (all[i].has_data && !elf.Has(all[i].offset, all[i].size)) return InvalidArgument("ELF section out of bounds");
    all[i].name_at = elf.Le(h, 4);
  }
  const Section& strtab = all[names];
  for (Section& s : all) {
    if (!strtab.has_data || s.name_at >= strtab.size) return InvalidArgument("ELF section name out of bounds");
    const char* start = elf.data() + strtab.offset + s.name_at;
    s.name.assign(start, strnlen(start, strtab.size - s.name_at));
  }
  *sections = std::move(all);
  return Status::Ok();
}

void ReadCubin(const Bytes& payload, DeviceImage* image) {
  std::vector<Section> sections;
  uint16_t machine = 0;
  uint32_t flags = 0;
  if (!ReadElf(payload, &sections, &machine, &flags).ok() || machine != kEmCuda) return;  // compressed or foreign
  image->readable = true;
  image->elf_arch = static_cast<int>((flags >> 8) & 0xff);
  const std::string prefix = ".text.";
  for (const Section& s : sections) {
    if (s.name.compare(0, prefix.size(), prefix) == 0) image->kernels.push_back(s.name.substr(prefix.size()));
  }
}

Status ReadFatbin(const Bytes& fatbin, std::vector<DeviceImage>* out) {
  uint64_t at = 0;
  while (fatbin.Has(at, 16) && fatbin.Le(at, 4) == kFatbinMagic) {
    const uint64_t header = fatbin.Le(at + 6, 2), entries = fatbin.Le(at + 8, 8);
    if (header < 16 || !fatbin.Has(at + header, entries)) return InvalidArgument("fat binary container out of bounds");
    uint64_t e = at + header;
    const uint64_t end = at + header + entries;
    while (e < end) {
      if (!fatbin.Has(e, 32) || e + 32 > end) return InvalidArgument("fat binary entry header out of bounds");
      const uint64_t kind = fatbin.Le(e, 2), entry_header = fatbin.Le(e + 4, 4), payload = fatbin.Le(e + 8, 8);
      if (entry_header < 32 || entry_header > end - e || payload > end - e - entry_header) {
        return InvalidArgument("fat binary entry out of bounds");
      }
      DeviceImage image;
      image.kind = kind == 1 ? DeviceImage::Kind::kPtx : kind == 2 ? DeviceImage::Kind::kCubin : DeviceImage::Kind::kOther;
      image.arch = static_cast<int>(fatbin.Le(e + 28, 4));
      if (image.kind == DeviceImage::Kind::kCubin) ReadCubin(fatbin.Slice(e + entry_header, payload), &image);
      out->push_back(std::move(image));
      e += entry_header + payload;
    }
    at = (end + 7) / 8 * 8;  // containers follow each other 8-byte aligned
  }
  return Status::Ok();
}

}  // namespace

Status ReadDeviceImages(const std::string& object, std::vector<DeviceImage>* out) {
  out->clear();
  const Bytes file(object.data(), object.size());
  std::vector<Section> sections;
  uint16_t machine = 0;
  uint32_t flags = 0;
  TESSERA_RETURN_IF_ERROR(ReadElf(file, &sections, &machine, &flags).Annotate("host object"));
  for (const Section& s : sections) {
    if (s.name != ".nv_fatbin" || !s.has_data) continue;
    TESSERA_RETURN_IF_ERROR(ReadFatbin(file.Slice(s.offset, s.size), out));
  }
  if (out->empty()) return InvalidArgument("no device code: the object has no .nv_fatbin section with entries");
  return Status::Ok();
}

}  // namespace cuda
}  // namespace tessera
