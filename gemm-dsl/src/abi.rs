//! The kernel ABI: what a generated kernel is to whoever loads and launches it.
//!
//! [`KernelInfo`] bundles a kernel's PTX with its entry name, [`LaunchShape`] (block, grid
//! rule, shared memory, alignments, cluster), typed parameter list ([`KernelParam`]) and the
//! SASS it promises ([`SassCheck`]). Code generation writes these, the `gemm!` macro bakes them
//! into a user's crate as constants, and the runtime launches any family from them alone. They
//! are plain data at the bottom of the dependency graph: this module imports nothing of the
//! crate but the spec's own enums.

/// A SASS opcode that proves (or disproves) which hardware path a kernel takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Opcode {
    /// SIMT fused multiply-add.
    Ffma,
    /// Global load to registers.
    Ldg,
    /// Shared store from registers.
    Sts,
    /// Shared load to registers.
    Lds,
    /// `cp.async`: global to shared without registers.
    Ldgsts,
    /// `cp.async.commit_group`.
    Ldgdepbar,
    /// `cp.async.wait_group` (and other scoreboard waits).
    Depbar,
    /// `ldmatrix`.
    Ldsm,
    /// `stmatrix`.
    Stsm,
    /// `mma.sync` tensor-core op.
    Hmma,
    /// `wgmma.mma_async` of 16-bit (and tf32) inputs.
    Hgmma,
    /// `wgmma.mma_async` of fp8 inputs.
    Qgmma,
    /// TMA tensor load.
    Utmaldg,
    /// TMA tensor store.
    Utmastg,
    /// mbarrier operations (`SYNCS.EXCH`, `SYNCS.ARRIVE.TRANS64`, `SYNCS.PHASECHK`).
    Syncs,
    /// `setmaxnreg`.
    Usetmaxreg,
    /// Local memory load / store: register spills or dynamically indexed arrays.
    Ldl,
    Stl,
}

impl Opcode {
    /// The SASS mnemonic without modifiers, as nvdisasm prints it.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Opcode::Ffma => "FFMA",
            Opcode::Ldg => "LDG",
            Opcode::Sts => "STS",
            Opcode::Lds => "LDS",
            Opcode::Ldgsts => "LDGSTS",
            Opcode::Ldgdepbar => "LDGDEPBAR",
            Opcode::Depbar => "DEPBAR",
            Opcode::Ldsm => "LDSM",
            Opcode::Stsm => "STSM",
            Opcode::Hmma => "HMMA",
            Opcode::Hgmma => "HGMMA",
            Opcode::Qgmma => "QGMMA",
            Opcode::Utmaldg => "UTMALDG",
            Opcode::Utmastg => "UTMASTG",
            Opcode::Syncs => "SYNCS",
            Opcode::Usetmaxreg => "USETMAXREG",
            Opcode::Ldl => "LDL",
            Opcode::Stl => "STL",
        }
    }
}

/// What the SASS of a kernel must (not) contain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SassCheck {
    Present(Opcode),
    Absent(Opcode),
    /// An instruction whose opcode with modifiers is this text or starts with it followed by
    /// `.`, e.g. `HMMA.16816.F32.BF16` or `LDSM.16.MT88.4`: proves the exact variant.
    PresentVariant(&'static str),
    /// An instruction whose opcode with modifiers is exactly this text: for variants that are
    /// a prefix of others, e.g. the f16 `HMMA.16816.F32`, which `HMMA.16816.F32.BF16` would
    /// satisfy as a [`SassCheck::PresentVariant`].
    PresentExact(&'static str),
}

/// Launch geometry and argument rules of an emitted kernel. Plain data, so `gemm!` can write
/// it as a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    pub threads_per_block: u32,
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub dynamic_smem_bytes: u32,
    /// Byte alignment A's and B's pointers and leading dimensions (in bytes) must have: the
    /// copy vector's.
    pub operand_align_bytes: u32,
    /// Byte alignment C's pointer and leading dimension must have: its widest store.
    pub output_align_bytes: u32,
    /// How A and B reach shared memory, so that a launch refused for alignment can name the
    /// spec change that accepts it.
    pub copy_path: CopyPath,
    /// Bytes of one A/B element and of one C element.
    pub input_element_bytes: u32,
    pub output_element_bytes: u32,
    /// Compute capability the kernel is built for (`major * 10 + minor`).
    pub compute_capability: u32,
    /// `sm_90a`-style targets run on exactly their compute capability, nowhere newer.
    pub arch_specific: bool,
    pub schedule: GridSchedule,
    /// Output tiles one thread-block cluster covers, down M and along N (`(1, 1)`: no
    /// clusters); [`LaunchShape::cluster_dims`] is the launch's cluster shape.
    pub cluster: (u32, u32),
    /// The kernel computes partial tiles at the edges, so M, N and K need only be positive;
    /// otherwise they must be tile multiples.
    pub partial_tiles: bool,
    /// How A and B lie in memory (the spec's `layout`), and C (its `c_layout`).
    pub a_order: StorageOrder,
    pub b_order: StorageOrder,
    pub c_order: StorageOrder,
    /// Bytes of global workspace the kernel needs per block of its largest grid
    /// (`tail = stream_k`: partial sums and flags; 0 for none). The flags must be zero
    /// before the first launch; every launch leaves them zero.
    pub workspace_bytes_per_block: u32,
}

/// How a kernel copies A and B into shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CopyPath {
    /// `ld.global` + `st.shared` (`copy: sync`, vectors of 2 to 16 bytes).
    Sync,
    /// `cp.async` (`copy: cp_async`, vectors of 4 to 16 bytes).
    CpAsync,
    /// The Tensor Memory Accelerator, which needs 16-byte strides.
    Tma,
}

impl CopyPath {
    pub const fn of(copy: crate::Copy) -> CopyPath {
        match copy {
            crate::Copy::Sync { .. } => CopyPath::Sync,
            crate::Copy::CpAsync { .. } => CopyPath::CpAsync,
            crate::Copy::Tma { .. } => CopyPath::Tma,
        }
    }
}

/// How an operand's elements lie in memory: lines of `ld` elements apart, each line a row
/// (row-major) or a column (column-major).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StorageOrder {
    RowMajor,
    ColMajor,
}

impl StorageOrder {
    /// What one line of the buffer is.
    pub const fn line(self) -> &'static str {
        match self {
            StorageOrder::RowMajor => "row",
            StorageOrder::ColMajor => "column",
        }
    }

    /// A's and B's orders under a spec's layout.
    pub const fn of_layout(layout: crate::Layout) -> (StorageOrder, StorageOrder) {
        use crate::Layout;
        use StorageOrder::{ColMajor, RowMajor};
        match layout {
            Layout::RowRow => (RowMajor, RowMajor),
            Layout::RowCol => (RowMajor, ColMajor),
            Layout::ColRow => (ColMajor, RowMajor),
            Layout::ColCol => (ColMajor, ColMajor),
        }
    }

    /// C's order under a spec's `c_layout`.
    pub const fn of_c_layout(c_layout: crate::CLayout) -> StorageOrder {
        match c_layout {
            crate::CLayout::Row => StorageOrder::RowMajor,
            crate::CLayout::Col => StorageOrder::ColMajor,
        }
    }
}

/// How the grid covers the output tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridSchedule {
    /// One block per tile: x walks N tiles, y walks M tiles.
    Tiles,
    /// A one-dimensional grid of at most as many blocks as the device holds at once, each
    /// looping over tiles in raster bands `group` tiles across (`schedule: persistent`).
    Persistent { group: u32 },
}

impl LaunchShape {
    /// How an operand lies in memory.
    pub const fn order(&self, operand: Operand) -> StorageOrder {
        match operand {
            Operand::A => self.a_order,
            Operand::B => self.b_order,
            Operand::C => self.c_order,
        }
    }

    /// The lines of an operand's buffer and each line's length, for an `m x n x k` product: a
    /// row-major M x K A is M rows of K elements, a column-major one K columns of M.
    pub const fn stored_dims(&self, operand: Operand, m: u32, n: u32, k: u32) -> (u32, u32) {
        let (rows, cols) = match operand {
            Operand::A => (m, k),
            Operand::B => (k, n),
            Operand::C => (m, n),
        };
        match self.order(operand) {
            StorageOrder::RowMajor => (rows, cols),
            StorageOrder::ColMajor => (cols, rows),
        }
    }

    /// Output tiles along M and N (partial edge tiles included).
    pub const fn tiles(&self, m: u32, n: u32) -> (u32, u32) {
        (m.div_ceil(self.tile_m), n.div_ceil(self.tile_n))
    }

    /// Blocks per cluster along the grid's x and y: a one-tile-per-block grid runs N tiles
    /// along x and M tiles along y, a persistent grid is one-dimensional.
    pub const fn cluster_dims(&self) -> (u32, u32) {
        let (rows, cols) = self.cluster;
        match self.schedule {
            GridSchedule::Tiles => (cols, rows),
            GridSchedule::Persistent { .. } => (rows * cols, 1),
        }
    }

    /// Grid for an `m x n x k` problem. `resident_blocks` is how many blocks of this kernel
    /// the device holds at once (SMs times blocks per SM, whole clusters): a persistent grid
    /// launches no more (and spreads its tiles evenly, see [`LaunchShape::grid_batched`]), a
    /// one-tile-per-block grid ignores it. Clustered grids are whole
    /// clusters; the blocks over the matrix's edge compute nothing they store.
    pub const fn grid(&self, m: u32, n: u32, k: u32, resident_blocks: u32) -> (u32, u32, u32) {
        self.grid_batched(m, n, k, 1, resident_blocks)
    }

    /// The units of a persistent walk over `batch` products: output tiles, or a cluster's
    /// tiles where blocks form clusters.
    const fn walk_tiles(&self, m: u32, n: u32, batch: u32) -> u32 {
        let (tiles_m, tiles_n) = self.tiles(m, n);
        let (rows, cols) = self.cluster;
        tiles_m
            .div_ceil(rows)
            .saturating_mul(tiles_n.div_ceil(cols))
            .saturating_mul(batch)
    }

    /// Grid for `batch` products of `m x n x k`, as kernels launch it: a one-tile-per-block
    /// grid runs the batch along z, a persistent grid walks `batch` times the tiles of one
    /// product. A walk of whole tiles is spread evenly: the rounds of tiles the
    /// `resident_blocks` need, on as few blocks (whole clusters) as take that many rounds (512
    /// tiles on 132 SMs: 4 rounds on 128 blocks, not 116 blocks with 4 and 16 with 3; measured
    /// in `results/grid-2026-11-25/`). A stream-K walk keeps
    /// [`LaunchShape::full_grid_batched`]: each block takes a share of the tail.
    pub const fn grid_batched(
        &self,
        m: u32,
        n: u32,
        k: u32,
        batch: u32,
        resident_blocks: u32,
    ) -> (u32, u32, u32) {
        let full = self.full_grid_batched(m, n, k, batch, resident_blocks);
        let (rows, cols) = self.cluster;
        let per_cluster = rows * cols;
        match self.schedule {
            GridSchedule::Persistent { .. } if self.workspace_bytes_per_block == 0 => {
                let walk_tiles = self.walk_tiles(m, n, batch);
                let clusters = full.0 / per_cluster;
                if clusters == 0 || walk_tiles <= clusters {
                    full
                } else {
                    let rounds = walk_tiles.div_ceil(clusters);
                    (walk_tiles.div_ceil(rounds) * per_cluster, 1, 1)
                }
            }
            _ => full,
        }
    }

    /// [`LaunchShape::grid_batched`] without the even spread: a persistent grid takes every
    /// block the device holds at once (whole clusters), up to one per unit of its walk (a
    /// tile, or a k tile of a stream-K walk, which shares out k tiles and so fills the device
    /// even where the tiles are fewer than the blocks it holds). A one-tile-per-block grid is
    /// the same either way.
    pub const fn full_grid_batched(
        &self,
        m: u32,
        n: u32,
        k: u32,
        batch: u32,
        resident_blocks: u32,
    ) -> (u32, u32, u32) {
        let (tiles_m, tiles_n) = self.tiles(m, n);
        let (rows, cols) = self.cluster;
        match self.schedule {
            GridSchedule::Tiles => (
                tiles_n.div_ceil(cols) * cols,
                tiles_m.div_ceil(rows) * rows,
                batch,
            ),
            GridSchedule::Persistent { .. } => {
                let per_cluster = rows * cols;
                let walk_tiles = self.walk_tiles(m, n, batch);
                let units = if self.workspace_bytes_per_block > 0 {
                    walk_tiles.saturating_mul(k.div_ceil(self.tile_k))
                } else {
                    walk_tiles
                };
                let needed = units.saturating_mul(per_cluster);
                let blocks = if resident_blocks < needed {
                    resident_blocks
                } else {
                    needed
                };
                let blocks = blocks / per_cluster * per_cluster;
                (if blocks == 0 { per_cluster } else { blocks }, 1, 1)
            }
        }
    }

    /// Whether the kernel can compute this problem: positive sizes, tile multiples unless the
    /// kernel computes partial tiles, and tile counts a persistent schedule's 32-bit indices hold.
    pub fn check_dims(&self, m: u32, n: u32, k: u32) -> Result<(), String> {
        self.check_batched_dims(m, n, k, 1)
    }

    /// [`LaunchShape::check_dims`] for `batch` products (at least one): a persistent
    /// schedule walks the tiles of all of them with one 32-bit index.
    pub fn check_batched_dims(&self, m: u32, n: u32, k: u32, batch: u32) -> Result<(), String> {
        if batch == 0 {
            return Err("a batch of 0 products: the batch count must be at least 1".to_string());
        }
        for (dim, value, tile) in [
            ("M", m, self.tile_m),
            ("N", n, self.tile_n),
            ("K", k, self.tile_k),
        ] {
            if self.partial_tiles {
                if value == 0 {
                    return Err(format!("{dim} = 0: every dimension must be at least 1"));
                }
            } else if value == 0 || value % tile != 0 {
                return Err(format!(
                    "{dim} = {value} is not a positive multiple of the tile's {tile}"
                ));
            }
        }
        if let GridSchedule::Persistent { group } = self.schedule {
            // The kernel's tile index, the next index and a band's tile count are 32-bit.
            let (tiles_m, tiles_n) = self.tiles(m, n);
            let (tiles_m, tiles_n) = (u64::from(tiles_m), u64::from(tiles_n));
            let band_tiles = u64::from(group) * tiles_m.max(tiles_n);
            if 2 * tiles_m * tiles_n * u64::from(batch) + band_tiles > u64::from(i32::MAX as u32) {
                let products = match batch {
                    1 => String::new(),
                    batch => format!(" in each of {batch} products"),
                };
                return Err(format!(
                    "{tiles_m} x {tiles_n} tiles{products} overflow the persistent schedule's 32-bit tile index"
                ));
            }
            // A stream-K tail numbers its k tiles (at most every tile's) with 32 bits.
            let k_tiles = u64::from(k.div_ceil(self.tile_k));
            let tail_positions = tiles_m * tiles_n * u64::from(batch) * k_tiles;
            if self.workspace_bytes_per_block > 0 && tail_positions > u64::from(u32::MAX) {
                return Err(format!(
                    "{tiles_m} x {tiles_n} tiles x {k_tiles} k tiles{} overflow the stream-K tail's 32-bit positions",
                    match batch {
                        1 => String::new(),
                        batch => format!(" x {batch} products"),
                    }
                ));
            }
        }
        Ok(())
    }
}

/// The three matrices of `C = A·B`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operand {
    A,
    B,
    C,
}

impl Operand {
    pub const fn name(self) -> &'static str {
        match self {
            Operand::A => "A",
            Operand::B => "B",
            Operand::C => "C",
        }
    }
}

impl std::fmt::Display for Operand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A 32-bit number of the problem a kernel takes as a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    M,
    N,
    K,
    /// Row strides of A, B and C, in elements.
    Lda,
    Ldb,
    Ldc,
    /// Products in a strided batch (1 for a single product).
    Batch,
    /// Experts of a grouped launch (`groups:`): B's matrices, and the entries of the
    /// experts' row table.
    Groups,
    /// `groups: masked`: the rows each expert owns in A and D.
    GroupCapacity,
}

/// How a tensor map tiles an operand's global matrix: boxes of `inner` elements along the
/// contiguous dimension by `outer` rows, landing in shared memory with a `swizzle_bytes` XOR
/// swizzle (0 for none). Elements outside the matrix read as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMapBox {
    pub operand: Operand,
    pub inner: u32,
    pub outer: u32,
    pub swizzle_bytes: u32,
}

/// What a kernel parameter carries. The launcher fills each kind from the launch's
/// arguments, so it launches any family from this description alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParamKind {
    /// An operand's device address (`.u64`).
    Pointer(Operand),
    /// A problem number (`.u32`).
    U32(Scalar),
    /// A 128-byte `CUtensorMap` over an operand, passed by value (`.align 64 .b8 [128]`).
    /// Its third dimension runs over the batch's matrices.
    TensorMap(TensorMapBox),
    /// Elements from one of an operand's matrices in a strided batch to the next (`.u64`; 0
    /// for an A or B that every product shares).
    BatchStride(Operand),
    /// The kernel's global workspace (`.u64` device address,
    /// [`LaunchShape::workspace_bytes_per_block`] per block of the grid, 16-byte aligned).
    Workspace,
    /// A factor of the fused epilogue (`.f32`).
    Factor(Factor),
    /// The device address of a vector or matrix the fused epilogue reads or writes (`.u64`).
    EpilogueBuffer(EpilogueBuffer),
    /// Elements from one product's bias vector to the next (`.u64`; 0: one bias for the
    /// whole batch).
    BiasBatchStride,
    /// The device address of a grouped launch's int32 row table (`.u64`, `groups:`): per
    /// expert the end of its rows (`contiguous`, a prefix sum) or its count (`masked`).
    GroupRows,
    /// A 128-byte `CUtensorMap` over C-in, laid out as C (its sizes, leading dimension and
    /// batch stride) with C's box: an epilogue that loads C-in's boxes with the TMA.
    CInTensorMap(TensorMapBox),
}

/// The factors of `D = act(α·A·B + β·C + bias)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Factor {
    Alpha,
    Beta,
}

/// What the fused epilogue reads and writes besides the accumulators and C.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EpilogueBuffer {
    /// C-in: M x N with C's leading dimension and batch stride, in C's element type.
    CIn,
    /// The bias vector: M (row) or N (col) elements per product.
    Bias,
    /// The value before the activation (`aux: pre_activation`), written: laid out as C.
    Aux,
    /// fp8 A's and B's dequantization scales: one f32 each (`quant: tensor`, read by the
    /// epilogue), or their block scales (`quant: block`, read by the main loop).
    AScale,
    BScale,
    /// A factor per row of D (`row_scale: f32`): M f32 per product, or a grouped kernel's
    /// one per row of A.
    RowScale,
}

/// Bytes of a `CUtensorMap` kernel parameter, and its alignment.
pub const TENSOR_MAP_BYTES: u32 = 128;
pub const TENSOR_MAP_ALIGN: u32 = 64;

/// One kernel parameter, in order. Its PTX name is `<kernel>_<name>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelParam {
    pub name: &'static str,
    pub kind: ParamKind,
    pub meaning: &'static str,
}

impl KernelParam {
    /// The PTX type of the `.param` declaration, without the name (a tensor map adds `[128]`
    /// after it).
    pub const fn ptx_type(&self) -> &'static str {
        match self.kind {
            ParamKind::Pointer(_)
            | ParamKind::BatchStride(_)
            | ParamKind::Workspace
            | ParamKind::EpilogueBuffer(_)
            | ParamKind::BiasBatchStride
            | ParamKind::GroupRows => ".u64",
            ParamKind::U32(_) => ".u32",
            ParamKind::Factor(_) => ".f32",
            ParamKind::TensorMap(_) | ParamKind::CInTensorMap(_) => ".align 64 .b8",
        }
    }

    /// The full `.param` declaration for `kernel`'s entry.
    pub fn ptx_declaration(&self, kernel: &str) -> String {
        match self.kind {
            ParamKind::TensorMap(_) | ParamKind::CInTensorMap(_) => format!(
                ".param {} {kernel}_{}[{TENSOR_MAP_BYTES}]",
                self.ptx_type(),
                self.name
            ),
            _ => format!(".param {} {kernel}_{}", self.ptx_type(), self.name),
        }
    }
}

/// The problem sizes, which every family's kernel takes in this order.
pub const SIZE_PARAMS: [KernelParam; 3] = [
    KernelParam {
        name: "m",
        kind: ParamKind::U32(Scalar::M),
        meaning: "rows of A and C",
    },
    KernelParam {
        name: "n",
        kind: ParamKind::U32(Scalar::N),
        meaning: "columns of B and C",
    },
    KernelParam {
        name: "k",
        kind: ParamKind::U32(Scalar::K),
        meaning: "columns of A, rows of B",
    },
];

/// The strided batch, which every family's kernel takes last, in this order: the products
/// `C_i = A_i·B_i` for `i < batch`, each operand's matrix `i` `i · stride` elements past its
/// first.
pub const BATCH_PARAMS: [KernelParam; 4] = [
    KernelParam {
        name: "batch",
        kind: ParamKind::U32(Scalar::Batch),
        meaning: "products in the batch",
    },
    KernelParam {
        name: "stride_a",
        kind: ParamKind::BatchStride(Operand::A),
        meaning: "elements from one A to the next (0: one A for every product)",
    },
    KernelParam {
        name: "stride_b",
        kind: ParamKind::BatchStride(Operand::B),
        meaning: "elements from one B to the next (0: one B for every product)",
    },
    KernelParam {
        name: "stride_c",
        kind: ParamKind::BatchStride(Operand::C),
        meaning: "elements from one C to the next",
    },
];

/// The parameters of the SIMT and mma.sync kernels: `C = A·B` by pointers, sizes, leading
/// dimensions and the batch.
pub const GEMM_PARAMS: &[KernelParam] = &[
    KernelParam {
        name: "a",
        kind: ParamKind::Pointer(Operand::A),
        meaning: "A, M x K, device pointer",
    },
    KernelParam {
        name: "b",
        kind: ParamKind::Pointer(Operand::B),
        meaning: "B, K x N, device pointer",
    },
    KernelParam {
        name: "c",
        kind: ParamKind::Pointer(Operand::C),
        meaning: "C, M x N, device pointer (written)",
    },
    SIZE_PARAMS[0],
    SIZE_PARAMS[1],
    SIZE_PARAMS[2],
    KernelParam {
        name: "lda",
        kind: ParamKind::U32(Scalar::Lda),
        meaning: "A row stride, elements",
    },
    KernelParam {
        name: "ldb",
        kind: ParamKind::U32(Scalar::Ldb),
        meaning: "B row stride, elements",
    },
    KernelParam {
        name: "ldc",
        kind: ParamKind::U32(Scalar::Ldc),
        meaning: "C row stride, elements",
    },
    BATCH_PARAMS[0],
    BATCH_PARAMS[1],
    BATCH_PARAMS[2],
    BATCH_PARAMS[3],
];

/// A grouped kernel's parameters (`groups:`), after the batch's: the experts' row table,
/// their count and, for `masked`, the rows each owns. None for a spec without groups.
pub fn grouped_params(groups: crate::Groups) -> Vec<KernelParam> {
    let table = |meaning| KernelParam {
        name: "group_rows",
        kind: ParamKind::GroupRows,
        meaning,
    };
    let count = KernelParam {
        name: "groups",
        kind: ParamKind::U32(Scalar::Groups),
        meaning: "experts: B's matrices and the row table's entries",
    };
    match groups {
        crate::Groups::None => Vec::new(),
        crate::Groups::Contiguous => vec![
            table("per expert, the end of its rows in A and D (int32 prefix sums), device pointer"),
            count,
        ],
        crate::Groups::Masked => vec![
            table("per expert, the rows it holds (int32 counts), device pointer"),
            count,
            KernelParam {
                name: "group_capacity",
                kind: ParamKind::U32(Scalar::GroupCapacity),
                meaning: "rows each expert owns in A and D",
            },
        ],
    }
}

/// The fused epilogue's parameters, which every family's kernel takes last, in this order:
/// fp8 operands' scales (`quant: tensor`), α and β (where `scale` has them), C-in (`alpha_beta`), the bias vector and its batch
/// stride, the aux output (`aux: pre_activation`), the rows' factors (`row_scale`). None for a
/// spec without a fused epilogue.
pub fn epilogue_params(spec: &crate::GemmSpec) -> Vec<KernelParam> {
    let crate::GemmSpec {
        scale,
        bias,
        aux,
        quant,
        row_scale,
        ..
    } = *spec;
    let mut params = Vec::new();
    let scales = match quant {
        crate::Quant::None => None,
        crate::Quant::Tensor => Some((
            "A's dequantization scale, one f32, device pointer",
            "B's dequantization scale, one f32, device pointer",
        )),
        crate::Quant::Block => Some((
            "A's block scales, ceil(K/128) lines of M rounded up to 4 f32 (one per row per 128 k), device pointer, 16-byte aligned",
            "B's block scales, ceil(N/128) lines of ceil(K/128) f32 (one per 128x128 block), device pointer",
        )),
    };
    if let Some((a_meaning, b_meaning)) = scales {
        params.push(KernelParam {
            name: "a_scale",
            kind: ParamKind::EpilogueBuffer(EpilogueBuffer::AScale),
            meaning: a_meaning,
        });
        params.push(KernelParam {
            name: "b_scale",
            kind: ParamKind::EpilogueBuffer(EpilogueBuffer::BScale),
            meaning: b_meaning,
        });
    }
    if scale.has_alpha() {
        params.push(KernelParam {
            name: "alpha",
            kind: ParamKind::Factor(Factor::Alpha),
            meaning: "α, the product's factor",
        });
    }
    if scale.reads_c() {
        params.push(KernelParam {
            name: "beta",
            kind: ParamKind::Factor(Factor::Beta),
            meaning: "β, C-in's factor",
        });
        params.push(KernelParam {
            name: "c_in",
            kind: ParamKind::EpilogueBuffer(EpilogueBuffer::CIn),
            meaning: "C-in, M x N with C's row stride and batch stride, device pointer (read; may be C itself)",
        });
    }
    if let Some((along, _)) = bias.vector() {
        params.push(KernelParam {
            name: "bias",
            kind: ParamKind::EpilogueBuffer(EpilogueBuffer::Bias),
            meaning: match along {
                crate::BiasAlong::Row => "bias, one value per row (M), device pointer",
                crate::BiasAlong::Col => "bias, one value per column (N), device pointer",
            },
        });
        params.push(KernelParam {
            name: "stride_bias",
            kind: ParamKind::BiasBatchStride,
            meaning: "elements from one product's (a grouped kernel's: expert's) bias to the next (0: one bias for every product)",
        });
    }
    if aux == crate::Aux::PreActivation {
        params.push(KernelParam {
            name: "aux",
            kind: ParamKind::EpilogueBuffer(EpilogueBuffer::Aux),
            meaning: "aux, M x N with C's row stride and batch stride, device pointer (written: the values before the activation)",
        });
    }
    if row_scale == crate::RowScale::F32 {
        params.push(KernelParam {
            name: "row_scale",
            kind: ParamKind::EpilogueBuffer(EpilogueBuffer::RowScale),
            meaning: if spec.groups.is_grouped() {
                "the rows' factors, one f32 per row of A (every expert's), device pointer"
            } else {
                "the rows' factors, M f32 per product, product after product, device pointer"
            },
        });
    }
    params
}

/// A kernel the runtime may load and launch: PTX text together with the entry name, launch
/// shape, parameter list and SASS promises that describe it. The launcher's safety argument
/// rests on these agreeing (a block size, shared-memory size or grid rule that is not the
/// PTX's own lets a kernel write out of bounds), so safe code gets a `KernelInfo` only from
/// code generation (`gemm-codegen`'s `Emitted::info`, or the `gemm!` macro, which bakes one
/// `emit` into a crate); anything else goes through the `unsafe` [`KernelInfo::from_parts`].
///
/// Safe code can neither write one out field by field nor edit one:
///
/// ```compile_fail,E0451
/// let info = gemm_dsl::abi::KernelInfo {
///     name: "k",
///     ptx: "// another kernel",
///     spec: "name: k",
///     launch: todo!(),
///     params: gemm_dsl::abi::GEMM_PARAMS,
///     expected_sass: &[],
/// };
/// ```
///
/// ```compile_fail,E0133
/// fn doubled(info: gemm_dsl::abi::KernelInfo<'_>) -> gemm_dsl::abi::KernelInfo<'_> {
///     let mut parts = info.parts();
///     parts.launch.threads_per_block *= 2;
///     gemm_dsl::abi::KernelInfo::from_parts(parts)
/// }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct KernelInfo<'a> {
    name: &'a str,
    ptx: &'a str,
    spec: &'a str,
    launch: LaunchShape,
    params: &'a [KernelParam],
    expected_sass: &'a [SassCheck],
}

/// The parts of a [`KernelInfo`], as plain data: read with [`KernelInfo::parts`], put
/// together again only with the `unsafe` [`KernelInfo::from_parts`].
#[derive(Clone, Copy, Debug)]
pub struct KernelParts<'a> {
    /// The PTX entry point.
    pub name: &'a str,
    pub ptx: &'a str,
    /// The validated spec, every key explicit (the element types are read from it).
    pub spec: &'a str,
    pub launch: LaunchShape,
    pub params: &'a [KernelParam],
    pub expected_sass: &'a [SassCheck],
}

impl<'a> KernelInfo<'a> {
    /// Puts a kernel description together from parts that did not all come from one
    /// `emit` (a hand-edited PTX variant, a description the `gemm!` macro wrote out as
    /// constants).
    ///
    /// # Safety
    ///
    /// The runtime launches the PTX on the strength of the other parts alone. The caller
    /// promises that:
    /// - `ptx` declares a `.visible .entry` named `name` whose parameters are `params`, in
    ///   order, with the types [`KernelParam::ptx_declaration`] writes (the runtime checks
    ///   this one at load time and refuses a mismatch, but relies on the rest);
    /// - launched with `launch`'s block size, dynamic shared memory, grid and cluster shape
    ///   on any problem `launch` admits ([`LaunchShape::check_dims`], and operands, strides
    ///   and alignments that pass the runtime's launch checks), the entry reads only A and B
    ///   and writes only C within the sizes those checks establish, and uses no more shared
    ///   memory than `launch.dynamic_smem_bytes`;
    /// - its elements have the sizes `launch` gives and the types `spec` names (`dtype`,
    ///   `out`), and its tensor-map parameters (if any) expect the boxes `params` describes.
    ///
    /// Descriptions from code generation (`gemm-codegen`'s `Emitted::info`) meet this by
    /// construction.
    pub const unsafe fn from_parts(parts: KernelParts<'a>) -> KernelInfo<'a> {
        let KernelParts {
            name,
            ptx,
            spec,
            launch,
            params,
            expected_sass,
        } = parts;
        KernelInfo {
            name,
            ptx,
            spec,
            launch,
            params,
            expected_sass,
        }
    }

    /// A copy of the parts, to read or to edit into a variant.
    pub const fn parts(&self) -> KernelParts<'a> {
        KernelParts {
            name: self.name,
            ptx: self.ptx,
            spec: self.spec,
            launch: self.launch,
            params: self.params,
            expected_sass: self.expected_sass,
        }
    }

    /// The PTX entry point.
    pub const fn name(&self) -> &'a str {
        self.name
    }

    pub const fn ptx(&self) -> &'a str {
        self.ptx
    }

    /// The validated spec, every key explicit.
    pub const fn spec(&self) -> &'a str {
        self.spec
    }

    pub const fn launch(&self) -> &LaunchShape {
        &self.launch
    }

    pub const fn params(&self) -> &'a [KernelParam] {
        self.params
    }

    pub const fn expected_sass(&self) -> &'a [SassCheck] {
        self.expected_sass
    }

    /// The grouped layout the kernel walks (`groups:`), read from its parameters: a row
    /// table, and a capacity where experts own equal rows.
    pub fn groups(&self) -> crate::Groups {
        let takes = |kind| self.params.iter().any(|param| param.kind == kind);
        match (
            takes(ParamKind::GroupRows),
            takes(ParamKind::U32(Scalar::GroupCapacity)),
        ) {
            (false, _) => crate::Groups::None,
            (true, false) => crate::Groups::Contiguous,
            (true, true) => crate::Groups::Masked,
        }
    }
}

/// Writes a value of the ABI as a Rust expression, its types named under `path` (the
/// crate that re-exports this module to the user, e.g. `::gemm_runtime`): the `gemm!` macro
/// bakes a kernel's description into the user's crate this way. Each type writes itself
/// here, beside its definition, and destructures itself, so a field added to the ABI cannot
/// be forgotten by the macro.
pub trait RustExpr {
    fn rust_expr(&self, path: &str) -> String;
}

/// Enums without fields write their variant's name, which is what `Debug` prints.
macro_rules! rust_expr_by_variant_name {
    ($($ty:ident),*) => {$(
        impl RustExpr for $ty {
            fn rust_expr(&self, path: &str) -> String {
                format!("{path}::{}::{self:?}", stringify!($ty))
            }
        }
    )*};
}

rust_expr_by_variant_name!(
    Opcode,
    CopyPath,
    StorageOrder,
    Operand,
    Scalar,
    Factor,
    EpilogueBuffer
);

impl RustExpr for SassCheck {
    fn rust_expr(&self, path: &str) -> String {
        match *self {
            SassCheck::Present(op) => format!("{path}::SassCheck::Present({})", op.rust_expr(path)),
            SassCheck::Absent(op) => format!("{path}::SassCheck::Absent({})", op.rust_expr(path)),
            SassCheck::PresentVariant(text) => {
                format!("{path}::SassCheck::PresentVariant({text:?})")
            }
            SassCheck::PresentExact(text) => format!("{path}::SassCheck::PresentExact({text:?})"),
        }
    }
}

impl RustExpr for GridSchedule {
    fn rust_expr(&self, path: &str) -> String {
        match *self {
            GridSchedule::Tiles => format!("{path}::GridSchedule::Tiles"),
            GridSchedule::Persistent { group } => {
                format!("{path}::GridSchedule::Persistent {{ group: {group} }}")
            }
        }
    }
}

impl RustExpr for LaunchShape {
    fn rust_expr(&self, path: &str) -> String {
        let LaunchShape {
            threads_per_block,
            tile_m,
            tile_n,
            tile_k,
            dynamic_smem_bytes,
            operand_align_bytes,
            output_align_bytes,
            copy_path,
            input_element_bytes,
            output_element_bytes,
            compute_capability,
            arch_specific,
            schedule,
            cluster: (cluster_rows, cluster_cols),
            partial_tiles,
            a_order,
            b_order,
            c_order,
            workspace_bytes_per_block,
        } = *self;
        format!(
            "{path}::LaunchShape {{ threads_per_block: {threads_per_block}, tile_m: {tile_m}, \
             tile_n: {tile_n}, tile_k: {tile_k}, dynamic_smem_bytes: {dynamic_smem_bytes}, \
             operand_align_bytes: {operand_align_bytes}, \
             output_align_bytes: {output_align_bytes}, copy_path: {}, \
             input_element_bytes: {input_element_bytes}, \
             output_element_bytes: {output_element_bytes}, \
             compute_capability: {compute_capability}, arch_specific: {arch_specific}, \
             schedule: {}, cluster: ({cluster_rows}, {cluster_cols}), \
             partial_tiles: {partial_tiles}, a_order: {}, b_order: {}, \
             c_order: {}, workspace_bytes_per_block: {workspace_bytes_per_block} }}",
            copy_path.rust_expr(path),
            schedule.rust_expr(path),
            a_order.rust_expr(path),
            b_order.rust_expr(path),
            c_order.rust_expr(path),
        )
    }
}

impl RustExpr for TensorMapBox {
    fn rust_expr(&self, path: &str) -> String {
        let TensorMapBox {
            operand,
            inner,
            outer,
            swizzle_bytes,
        } = *self;
        format!(
            "{path}::TensorMapBox {{ operand: {}, inner: {inner}, outer: {outer}, \
             swizzle_bytes: {swizzle_bytes} }}",
            operand.rust_expr(path)
        )
    }
}

impl RustExpr for ParamKind {
    fn rust_expr(&self, path: &str) -> String {
        match *self {
            ParamKind::Pointer(operand) => {
                format!("{path}::ParamKind::Pointer({})", operand.rust_expr(path))
            }
            ParamKind::U32(scalar) => format!("{path}::ParamKind::U32({})", scalar.rust_expr(path)),
            ParamKind::TensorMap(tile) => {
                format!("{path}::ParamKind::TensorMap({})", tile.rust_expr(path))
            }
            ParamKind::BatchStride(operand) => {
                format!(
                    "{path}::ParamKind::BatchStride({})",
                    operand.rust_expr(path)
                )
            }
            ParamKind::Workspace => format!("{path}::ParamKind::Workspace"),
            ParamKind::Factor(factor) => {
                format!("{path}::ParamKind::Factor({})", factor.rust_expr(path))
            }
            ParamKind::EpilogueBuffer(input) => {
                format!(
                    "{path}::ParamKind::EpilogueBuffer({})",
                    input.rust_expr(path)
                )
            }
            ParamKind::BiasBatchStride => format!("{path}::ParamKind::BiasBatchStride"),
            ParamKind::GroupRows => format!("{path}::ParamKind::GroupRows"),
            ParamKind::CInTensorMap(tile) => {
                format!("{path}::ParamKind::CInTensorMap({})", tile.rust_expr(path))
            }
        }
    }
}

impl RustExpr for KernelParam {
    fn rust_expr(&self, path: &str) -> String {
        let KernelParam {
            name,
            kind,
            meaning,
        } = *self;
        format!(
            "{path}::KernelParam {{ name: {name:?}, kind: {}, meaning: {meaning:?} }}",
            kind.rust_expr(path)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_expressions_name_every_type_under_the_path() {
        let param = KernelParam {
            name: "a_map",
            kind: ParamKind::TensorMap(TensorMapBox {
                operand: Operand::A,
                inner: 64,
                outer: 128,
                swizzle_bytes: 128,
            }),
            meaning: "tensor map over \"A\"",
        };
        assert_eq!(
            param.rust_expr("::rt"),
            "::rt::KernelParam { name: \"a_map\", kind: ::rt::ParamKind::TensorMap(\
             ::rt::TensorMapBox { operand: ::rt::Operand::A, inner: 64, outer: 128, \
             swizzle_bytes: 128 }), meaning: \"tensor map over \\\"A\\\"\" }"
        );
        assert_eq!(
            SassCheck::Absent(Opcode::Ldl).rust_expr("r"),
            "r::SassCheck::Absent(r::Opcode::Ldl)"
        );
        assert_eq!(
            GridSchedule::Persistent { group: 8 }.rust_expr("r"),
            "r::GridSchedule::Persistent { group: 8 }"
        );
    }
}
