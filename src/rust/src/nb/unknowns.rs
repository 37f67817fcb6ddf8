//! Where one species' unknowns sit: the optimiser's vector x of a species
//! (its estimable curves, then the border of dispersions and random
//! effects) and the state it decodes into.

use super::curve::curve_len;
use super::CountModel;

/// Where a species' free unknowns sit in the optimiser's vector x:
/// estimable curves first (context-major, then treatment), then the border:
/// the estimable contexts' ρ, then the free random effects.
#[derive(Clone, Debug)]
pub(crate) struct SpeciesLayout {
    pub species: usize,
    pub contexts: usize,
    pub treatments: usize,
    pub animals: usize,
    pub bins: usize,
    /// Degree per context.
    pub degrees: Vec<usize>,
    /// Per curve (c·T + t): start of its θ in x, `None` when the curve has
    /// no observed row (its values cannot be estimated).
    pub curve_offsets: Vec<Option<usize>>,
    /// Per context: index of ρ_c in x, `None` without observed rows.
    pub rho_index: Vec<Option<usize>>,
    /// Per animal and warp (point, rate, slope): index of u in x, `None`
    /// when that warp's σ is 0 (the effect is fixed at 0).
    pub u_index: Vec<[Option<usize>; 3]>,
    /// Sizes of the Hessian's diagonal blocks: one block per context with
    /// an estimable curve, holding all its estimable curves (the effect
    /// prior couples the curves of a context).
    pub block_sizes: Vec<usize>,
    /// Per curve (c·T + t): its Hessian block and the start of its θ within
    /// that block; `None` for a curve that is not estimated.
    pub curve_blocks: Vec<Option<(usize, usize)>>,
    pub border: usize,
    pub len: usize,
}

impl SpeciesLayout {
    /// `free_warps[w]`: whether warp w is estimated (its σ > 0).
    pub fn new(model: &CountModel, species: usize, free_warps: [bool; 3]) -> Self {
        let shape = model.table().shape();
        let (contexts, treatments, animals, bins) = (
            shape.contexts,
            shape.treatments,
            shape.ran_levels,
            shape.bins,
        );
        let degrees: Vec<usize> = (0..contexts)
            .map(|c| model.structure().degree(c, species))
            .collect();
        let observed = model.table().observed();
        let curve_has_rows = |c: usize, t: usize| {
            (0..animals).any(|r| {
                let first = model.table().block_key(r, c, t);
                observed[first..first + bins].iter().any(|&o| o)
            })
        };
        let mut next = 0;
        let mut curve_offsets = Vec::with_capacity(contexts * treatments);
        let mut block_sizes = Vec::new();
        for (c, &degree) in degrees.iter().enumerate() {
            for t in 0..treatments {
                if curve_has_rows(c, t) {
                    curve_offsets.push(Some(next));
                    block_sizes.push(curve_len(degree));
                    next += curve_len(degree);
                } else {
                    curve_offsets.push(None);
                }
            }
        }
        let border_start = next;
        let rho_index: Vec<Option<usize>> = (0..contexts)
            .map(|c| {
                (0..treatments)
                    .any(|t| curve_offsets[c * treatments + t].is_some())
                    .then(|| {
                        next += 1;
                        next - 1
                    })
            })
            .collect();
        let u_index = (0..animals)
            .map(|_| {
                let mut indices = [None; 3];
                for (w, index) in indices.iter_mut().enumerate() {
                    if free_warps[w] {
                        *index = Some(next);
                        next += 1;
                    }
                }
                indices
            })
            .collect();
        SpeciesLayout {
            species,
            contexts,
            treatments,
            animals,
            bins,
            degrees,
            curve_offsets,
            rho_index,
            u_index,
            block_sizes,
            curve_blocks: Vec::new(),
            border: next - border_start,
            len: next,
        }
        .with_context_blocks()
    }

    /// Groups the estimable curves' θ into one Hessian block per context
    /// (the curves of a context are contiguous in x).
    fn with_context_blocks(mut self) -> Self {
        self.block_sizes.clear();
        self.curve_blocks = vec![None; self.curve_offsets.len()];
        for c in 0..self.contexts {
            let size = curve_len(self.degrees[c]);
            let mut block_size = 0;
            for t in 0..self.treatments {
                let curve = c * self.treatments + t;
                if self.curve_offsets[curve].is_some() {
                    self.curve_blocks[curve] = Some((self.block_sizes.len(), block_size));
                    block_size += size;
                }
            }
            if block_size > 0 {
                self.block_sizes.push(block_size);
            }
        }
        self
    }

    /// The layout with only some unknowns free (the others held at the
    /// state's values): the curves marked in `curves`, the dispersions when
    /// `rho`, the random effects of `warps`. For warming up a fit block by
    /// block before the joint Newton steps.
    pub fn restricted(
        model: &CountModel,
        species: usize,
        curves: &[bool],
        rho: bool,
        warps: [bool; 3],
    ) -> Self {
        let mut layout = SpeciesLayout::new(model, species, warps);
        let mut next = 0;
        for (index, offset) in layout.curve_offsets.iter_mut().enumerate() {
            if offset.is_some() && curves[index] {
                *offset = Some(next);
                next += curve_len(layout.degrees[index / layout.treatments]);
            } else {
                *offset = None;
            }
        }
        let border_start = next;
        for index in layout.rho_index.iter_mut() {
            *index = (index.is_some() && rho).then(|| {
                next += 1;
                next - 1
            });
        }
        for indices in layout.u_index.iter_mut() {
            for index in indices.iter_mut() {
                *index = index.map(|_| {
                    next += 1;
                    next - 1
                });
            }
        }
        layout.border = next - border_start;
        layout.len = next;
        layout.with_context_blocks()
    }

    /// The layout with the dispersions held at the state's values: the
    /// random effects' indices move down over the removed ρ.
    pub(super) fn without_dispersion(mut self) -> Self {
        let removed = self.rho_index.iter().flatten().count();
        self.rho_index.iter_mut().for_each(|index| *index = None);
        for indices in &mut self.u_index {
            for index in indices.iter_mut().flatten() {
                *index -= removed;
            }
        }
        self.border -= removed;
        self.len -= removed;
        self
    }

    pub fn border_start(&self) -> usize {
        self.len - self.border
    }
}

/// Every value of a species' fit, estimable or not.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SpeciesState {
    /// θ per curve (c·T + t).
    pub theta: Vec<Vec<f64>>,
    /// ρ = ln φ per context.
    pub rho: Vec<f64>,
    /// u per animal.
    pub u: Vec<[f64; 3]>,
}

impl SpeciesState {
    /// The free unknowns, in the layout's order.
    pub fn to_vector(&self, layout: &SpeciesLayout) -> Vec<f64> {
        let mut x = vec![0.0; layout.len];
        for (curve, offset) in layout.curve_offsets.iter().enumerate() {
            if let Some(offset) = offset {
                let theta = &self.theta[curve];
                x[*offset..*offset + theta.len()].copy_from_slice(theta);
            }
        }
        for (c, index) in layout.rho_index.iter().enumerate() {
            if let Some(i) = index {
                x[*i] = self.rho[c];
            }
        }
        for (r, indices) in layout.u_index.iter().enumerate() {
            for w in 0..3 {
                if let Some(i) = indices[w] {
                    x[i] = self.u[r][w];
                }
            }
        }
        x
    }

    /// Copies the free unknowns back; fixed values are left as they are.
    pub fn set_vector(&mut self, layout: &SpeciesLayout, x: &[f64]) {
        for (curve, offset) in layout.curve_offsets.iter().enumerate() {
            if let Some(offset) = offset {
                let n = self.theta[curve].len();
                self.theta[curve].copy_from_slice(&x[*offset..*offset + n]);
            }
        }
        for (c, index) in layout.rho_index.iter().enumerate() {
            if let Some(i) = index {
                self.rho[c] = x[*i];
            }
        }
        for (r, indices) in layout.u_index.iter().enumerate() {
            for w in 0..3 {
                if let Some(i) = indices[w] {
                    self.u[r][w] = x[i];
                }
            }
        }
    }
}
