//! The launch's plan: the block's threads and registers, the tensor maps and the kernel's
//! parameters.

use super::descriptor::Major;
use super::WgmmaPlan;
use crate::plan::LaunchContract;
use gemm_dsl::abi::{
    epilogue_params, grouped_params, KernelParam, Operand, ParamKind, Scalar, TensorMapBox,
    BATCH_PARAMS, SIZE_PARAMS,
};
use gemm_dsl::family::wgmma::{OperandBoxes, SharedOperand, WgmmaGeometry, STORE_BOX_ROWS};
use gemm_dsl::{GemmSpec, RegisterBudget};
use serde::Serialize;

/// What the launch gives the kernel: threads, registers, the tensor maps' boxes and the
/// fused epilogue's arguments.
#[derive(Clone, Debug, Serialize)]
pub struct LaunchPlan {
    pub threads: u32,
    /// `.maxnreg`: the even split of the register file over the block's threads; ptxas honours
    /// `setmaxnreg` only under such a cap.
    pub max_registers: u32,
    /// `setmaxnreg` of the producer and the consumers, where the producer gives registers
    /// back.
    pub register_split: Option<RegisterSplit>,
    /// Consumer warpgroups; warpgroup 0 is the producer.
    pub consumers: u32,
    /// The boxes of A's and B's tensor maps, and of C's for `epilogue: tma`.
    #[serde(skip)]
    pub a_box: TensorMapBox,
    #[serde(skip)]
    pub b_box: TensorMapBox,
    #[serde(skip)]
    pub c_box: Option<TensorMapBox>,
    /// The fused epilogue's parameters, last in the list.
    #[serde(skip)]
    pub epilogue_params: Vec<KernelParam>,
    #[serde(skip)]
    pub groups: gemm_dsl::Groups,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RegisterSplit {
    pub producer: u32,
    pub consumer: u32,
}

impl LaunchPlan {
    pub(super) fn new(g: &WgmmaGeometry, spec: &GemmSpec) -> LaunchPlan {
        let shared = g.cluster.map(|c| c.shared);
        let cluster_blocks = g.cluster.map_or(1, |c| c.blocks);
        // The shared operand's map loads one block's row slice of each box.
        let tensor_box = |operand, boxes: &OperandBoxes, swizzle_bytes, shared_here| TensorMapBox {
            operand,
            inner: boxes.inner,
            outer: if shared_here {
                boxes.outer / cluster_blocks
            } else {
                boxes.outer
            },
            swizzle_bytes,
        };
        LaunchPlan {
            threads: g.threads,
            max_registers: RegisterBudget::limit_for(g.threads),
            register_split: g
                .register_split
                .map(|(producer, consumer)| RegisterSplit { producer, consumer }),
            consumers: g.consumers,
            a_box: tensor_box(
                Operand::A,
                &g.a_boxes,
                g.a_swizzle_bytes,
                shared == Some(SharedOperand::A),
            ),
            b_box: tensor_box(
                Operand::B,
                &g.b_boxes,
                g.b_swizzle_bytes,
                shared == Some(SharedOperand::B),
            ),
            c_box: g.store_staging.map(|staging| TensorMapBox {
                operand: Operand::C,
                inner: staging.box_cols,
                outer: STORE_BOX_ROWS,
                swizzle_bytes: staging.swizzle_bytes,
            }),
            epilogue_params: epilogue_params(spec),
            groups: spec.groups,
        }
    }
}

impl WgmmaPlan {
    pub fn launch_contract(&self) -> LaunchContract {
        let schedule = &self.schedule;
        LaunchContract {
            tile_k: self.main_loop.block_k,
            // TMA: global addresses 16-byte aligned, row strides multiples of 16 bytes.
            operand_align_bytes: 16,
            // The TMA's strides and the direct stores' 16-byte vectors alike; a column-major
            // C is stored element by element.
            output_align_bytes: match self.epilogue.columns {
                Some(_) => self.epilogue.out_bytes,
                None => 16,
            },
            params: self.params(),
            partial_tiles: true,
            cluster: (
                schedule.walk_tile_m / self.main_loop.block_m,
                schedule.walk_tile_n / self.main_loop.block_n,
            ),
            workspace_bytes_per_block: schedule.stream_k.as_ref().map_or(0, |s| s.record_bytes),
        }
    }

    /// Tensor maps over A and B (and C, for TMA stores); C's pointer; the sizes; C's row
    /// stride; the batch; a stream-K tail's workspace; the fused epilogue's arguments.
    fn params(&self) -> Vec<KernelParam> {
        let launch = &self.launch;
        let mut params = self.tensor_map_params();
        params.push(KernelParam {
            name: "c",
            kind: ParamKind::Pointer(Operand::C),
            meaning: match launch.c_box {
                Some(_) => "C, M x N, device pointer (written where N ends inside 16 bytes)",
                None if self.epilogue.columns.is_some() => {
                    "C, M x N column-major, device pointer (written)"
                }
                None => "C, M x N, device pointer (written)",
            },
        });
        params.extend(SIZE_PARAMS);
        params.push(KernelParam {
            name: "ldc",
            kind: ParamKind::U32(Scalar::Ldc),
            meaning: match self.epilogue.columns {
                Some(_) => "C column stride, elements (C column-major)",
                None => "C row stride, elements",
            },
        });
        params.extend(BATCH_PARAMS);
        params.extend(grouped_params(launch.groups));
        if self.schedule.stream_k.is_some() {
            params.push(KernelParam {
                name: "workspace",
                kind: ParamKind::Workspace,
                meaning: match launch.consumers {
                    1 => "stream-K workspace: per block, the partial sums of its consumer and a flag",
                    _ => "stream-K workspace: per block, the partial sums of its consumers and their flags",
                },
            });
        }
        params.extend(launch.epilogue_params.iter().copied());
        params
    }

    /// Tensor maps over A and B, and over C and C-in for TMA stores.
    fn tensor_map_params(&self) -> Vec<KernelParam> {
        let launch = &self.launch;
        let mut params = vec![
            KernelParam {
                name: "a_map",
                kind: ParamKind::TensorMap(launch.a_box),
                meaning: match self.main_loop.a_major {
                    Major::K => "tensor map over A (M x K, row-major)",
                    Major::MN => "tensor map over A (M x K, column-major)",
                },
            },
            KernelParam {
                name: "b_map",
                kind: ParamKind::TensorMap(launch.b_box),
                meaning: match self.main_loop.b_major {
                    Major::MN => "tensor map over B (K x N, row-major)",
                    Major::K => "tensor map over B (K x N, column-major)",
                },
            },
        ];
        if let Some(c_box) = launch.c_box {
            params.push(KernelParam {
                name: "c_map",
                kind: ParamKind::TensorMap(c_box),
                meaning: "tensor map over C (M x N, row-major, written)",
            });
            if self.epilogue.c_in_loads.is_some() {
                params.push(KernelParam {
                    name: "c_in_map",
                    kind: ParamKind::CInTensorMap(c_box),
                    meaning: "tensor map over C-in (laid out as C, read), C's box",
                });
            }
        }
        params
    }
}
