//! The parameter layout (model vignette §8): where every parameter of the
//! original likelihood sits, its role and its name.

use super::{Component, Design, RanBlocks, Structure, WarpKind};

/// Where every parameter lives in the flat vector (model vignette §8).
///
/// β of (component m, context c, species s) form one contiguous run ordered
/// block-major, treatment-minor (position k·T + i); the warping factors follow,
/// species-major, then ran level, then point/rate/slope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ParameterLayout {
    contexts: usize,
    species: usize,
    treatments: usize,
    ran_blocks: RanBlocks,
    degrees: Vec<usize>,
    /// Per (c, s) and component: start of its β run, `None` when it has no values.
    beta_starts: Vec<[Option<usize>; 3]>,
    warp_start: usize,
    len: usize,
}

fn component_slot(component: Component) -> usize {
    match component {
        Component::Rate => 0,
        Component::Slope => 1,
        Component::Point => 2,
    }
}

impl ParameterLayout {
    pub(crate) fn new(design: &Design, structure: &Structure) -> Result<Self, String> {
        let contexts = design.contexts().len();
        let species = design.species().len();
        if structure.contexts() != contexts || structure.species() != species {
            return Err(format!(
                "the structure is for {} contexts × {} species, the design has {contexts} × {species}",
                structure.contexts(),
                structure.species()
            ));
        }
        let treatments = design.treatment_count();
        let mut beta_starts = vec![[None; 3]; contexts * species];
        let mut next = 0usize;
        for component in Component::ALL {
            for c in 0..contexts {
                for s in 0..species {
                    let blocks = component.count(structure.degree(c, s));
                    if blocks == 0 {
                        continue;
                    }
                    beta_starts[c * species + s][component_slot(component)] = Some(next);
                    next += blocks * treatments;
                }
            }
        }
        let ran_blocks = design.ran_blocks();
        let warp_start = next;
        let len = warp_start + 3 * species * ran_blocks.warped_levels();
        Ok(Self {
            contexts,
            species,
            treatments,
            ran_blocks,
            degrees: structure.degrees().to_vec(),
            beta_starts,
            warp_start,
            len,
        })
    }

    /// Number of parameters P.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn degree(&self, context: usize, species: usize) -> usize {
        self.degrees[context * self.species + species]
    }

    /// Start of the β run of (component, context, species); `None` when that
    /// component has no values (tslope and tpoint of a degree-0 curve) or an
    /// index is out of range.
    pub(crate) fn beta_start(
        &self,
        component: Component,
        context: usize,
        species: usize,
    ) -> Option<usize> {
        if context >= self.contexts || species >= self.species {
            return None;
        }
        self.beta_starts[context * self.species + species][component_slot(component)]
    }

    /// Index of β for (component, context, species, block/transition k from 0, treatment).
    pub(crate) fn beta_index(
        &self,
        component: Component,
        context: usize,
        species: usize,
        block: usize,
        treatment: usize,
    ) -> Option<usize> {
        let start = self.beta_start(component, context, species)?;
        let blocks = component.count(self.degree(context, species));
        (block < blocks && treatment < self.treatments)
            .then(|| start + block * self.treatments + treatment)
    }

    /// Index of a warping factor for a real ran level; `None` when the model
    /// has a single ran level (no warping) or an index is out of range.
    pub(crate) fn warp_index(&self, kind: WarpKind, species: usize, ran: usize) -> Option<usize> {
        let warped = self.ran_blocks.warped_levels();
        (species < self.species && ran < warped)
            .then(|| self.warp_start + (species * warped + ran) * 3 + kind.offset())
    }

    /// First index of the warping factors (= number of β).
    #[cfg(test)]
    pub(crate) fn warp_start(&self) -> usize {
        self.warp_start
    }

    /// Number of tested effects, the β with a non-reference treatment.
    #[cfg(test)]
    pub(crate) fn tested_effect_count(&self) -> usize {
        let curve_values: usize = self
            .degrees
            .iter()
            .map(|&d| super::components_per_block(d))
            .sum();
        self.treatments.saturating_sub(1) * curve_values
    }

    /// Length of the boundary-distance vector (model vignette §11.1).
    pub(crate) fn boundary_distance_count(&self) -> usize {
        let per_curve: usize = self
            .degrees
            .iter()
            .map(|&d| boundary_distances_per_block(d))
            .sum();
        self.ran_blocks.count() * self.treatments * per_curve
    }

    /// What every parameter is, in layout order.
    pub(crate) fn roles(&self) -> Vec<ParameterRole> {
        let placeholder = ParameterRole::Warp {
            kind: WarpKind::Point,
            species: 0,
            ran: 0,
        };
        let mut roles = vec![placeholder; self.len];
        for component in Component::ALL {
            for context in 0..self.contexts {
                for species in 0..self.species {
                    let Some(start) = self.beta_start(component, context, species) else {
                        continue;
                    };
                    for block in 0..component.count(self.degree(context, species)) {
                        for treatment in 0..self.treatments {
                            roles[start + block * self.treatments + treatment] =
                                ParameterRole::Beta {
                                    component,
                                    context,
                                    species,
                                    block,
                                    treatment,
                                };
                        }
                    }
                }
            }
        }
        for species in 0..self.species {
            for ran in 0..self.ran_blocks.warped_levels() {
                for kind in WarpKind::ALL {
                    if let Some(index) = self.warp_index(kind, species, ran) {
                        roles[index] = ParameterRole::Warp { kind, species, ran };
                    }
                }
            }
        }
        roles
    }

    /// Parameter names in layout order (model vignette §8).
    pub(crate) fn names(&self, design: &Design) -> Vec<String> {
        self.roles()
            .into_iter()
            .map(|role| parameter_name(design, role))
            .collect()
    }
}

/// The name of a parameter, the original's scheme (model vignette §8): labels
/// joined with "_".
pub(super) fn parameter_name(design: &Design, role: ParameterRole) -> String {
    match role {
        ParameterRole::Beta {
            component,
            context,
            species,
            block,
            treatment,
        } => {
            let mc = component.name();
            let context = &design.contexts()[context];
            let species = &design.species()[species];
            let block = block + 1;
            if treatment == 0 {
                format!("baseline_{context}_{mc}_{species}_Tns/Blk{block}")
            } else {
                let trt = &design.treatments()[treatment].name;
                format!("beta_{mc}_{context}_{species}_{trt}_X_Tns/Blk{block}")
            }
        }
        ParameterRole::Warp { kind, species, ran } => format!(
            "wfactor_{}_{}_X_{}",
            kind.name(),
            design.ran_levels()[ran],
            design.species()[species]
        ),
    }
}

/// The meaning of one entry of the parameter vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ParameterRole {
    /// β of a curve component; treatment 0 is the baseline, block counts from 0.
    Beta {
        component: Component,
        context: usize,
        species: usize,
        block: usize,
        treatment: usize,
    },
    /// A warping factor of real ran level `ran` (from 0) and a species.
    Warp {
        kind: WarpKind,
        species: usize,
        ran: usize,
    },
}

/// Boundary distances of one block: d slopes, d+1 gaps and d+1 rates, or a
/// single rate distance for d = 0 (model vignette §11.1).
pub(crate) fn boundary_distances_per_block(degree: usize) -> usize {
    if degree == 0 {
        1
    } else {
        3 * degree + 2
    }
}
