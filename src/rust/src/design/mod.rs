//! The design both likelihoods share: grouping labels, fixed-effect factors,
//! the treatment set and its weight matrix W (model vignette §3); the degree
//! of every curve ([`degrees`]); and the parameter layout with its names and
//! index maps ([`layout`], §8).

pub(crate) mod degrees;
pub(crate) mod layout;

pub(crate) use degrees::Structure;
use layout::parameter_name;
pub(crate) use layout::{boundary_distances_per_block, ParameterLayout, ParameterRole};

use std::collections::HashSet;

/// Name of the treatment in which every factor sits at its reference level.
pub(crate) const REFERENCE_TREATMENT: &str = "ref";

/// W is dense T×T, so the treatment count is bounded to keep it in memory.
pub(crate) const MAX_TREATMENTS: usize = 4096;

/// More transitions than this cannot fit on any realistic bin axis; the bound
/// also keeps every size computation far from overflow.
pub(crate) const MAX_DEGREE: usize = 1 << 16;

/// A fixed-effect factor. The first level is the reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Factor {
    pub(crate) name: String,
    pub(crate) levels: Vec<String>,
    /// Time effects are cumulative: a later time point inherits every earlier one
    /// (model vignette §3).
    pub(crate) is_time_series: bool,
}

impl Factor {
    pub(crate) fn new(name: impl Into<String>, levels: Vec<String>) -> Self {
        Self {
            name: name.into(),
            levels,
            is_time_series: false,
        }
    }

    pub(crate) fn time_series(name: impl Into<String>, levels: Vec<String>) -> Self {
        Self {
            name: name.into(),
            levels,
            is_time_series: true,
        }
    }
}

/// The three model components of a poly-sigmoid (model vignette §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Component {
    /// `Rt`: the d+1 block rates on the log(1+rate) scale.
    Rate,
    /// `tslope`: the d transition slopes.
    Slope,
    /// `tpoint`: the d transition points on the bin axis.
    Point,
}

impl Component {
    /// Layout order of the parameter vector.
    pub(crate) const ALL: [Component; 3] = [Component::Rate, Component::Slope, Component::Point];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Component::Rate => "Rt",
            Component::Slope => "tslope",
            Component::Point => "tpoint",
        }
    }

    /// How many values of this component a curve of the given degree has.
    pub(crate) fn count(self, degree: usize) -> usize {
        match self {
            Component::Rate => degree + 1,
            Component::Slope | Component::Point => degree,
        }
    }

    /// Position of value `k` in a per-block vector laid out
    /// `[Rt_1..Rt_{d+1}, tslope_1..tslope_d, tpoint_1..tpoint_d]`.
    pub(crate) fn position(self, degree: usize, k: usize) -> usize {
        match self {
            Component::Rate => k,
            Component::Slope => degree + 1 + k,
            Component::Point => 2 * degree + 1 + k,
        }
    }
}

/// Number of component values of one block: d+1 rates, d slopes, d points.
pub(crate) fn components_per_block(degree: usize) -> usize {
    3 * degree + 1
}

/// The three warping factors of a (ran level, species) pair (model vignette §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum WarpKind {
    Point,
    Rate,
    Slope,
}

impl WarpKind {
    /// Layout order within one (species, ran level) triple.
    pub(crate) const ALL: [WarpKind; 3] = [WarpKind::Point, WarpKind::Rate, WarpKind::Slope];

    pub(crate) fn name(self) -> &'static str {
        match self {
            WarpKind::Point => "point",
            WarpKind::Rate => "rate",
            WarpKind::Slope => "slope",
        }
    }

    fn offset(self) -> usize {
        match self {
            WarpKind::Point => 0,
            WarpKind::Rate => 1,
            WarpKind::Slope => 2,
        }
    }
}

/// How the random-effect levels map onto the ran blocks of the summed table.
///
/// With two or more real levels the population pseudo-level ("none") comes
/// first and every real level is warped; with a single real level there is no
/// "none" block and that level stays unwarped (model vignette §4, §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RanBlocks {
    real_levels: usize,
}

impl RanBlocks {
    pub(crate) fn new(real_levels: usize) -> Self {
        Self { real_levels }
    }

    pub(crate) fn has_population_block(self) -> bool {
        self.real_levels >= 2
    }

    /// Number of ran blocks in the table (R+1, or 1 for a single level).
    pub(crate) fn count(self) -> usize {
        if self.has_population_block() {
            self.real_levels + 1
        } else {
            self.real_levels
        }
    }

    /// Number of real levels that carry warping parameters (R, or 0 for a single level).
    pub(crate) fn warped_levels(self) -> usize {
        if self.has_population_block() {
            self.real_levels
        } else {
            0
        }
    }

    pub(crate) fn block_of_real(self, real: usize) -> usize {
        if self.has_population_block() {
            real + 1
        } else {
            real
        }
    }

    /// The real level of a block; `None` for the population ("none") block.
    pub(crate) fn real_of_block(self, block: usize) -> Option<usize> {
        if self.has_population_block() {
            block.checked_sub(1)
        } else {
            Some(block)
        }
    }

    /// The real level whose warping factors apply to a block; `None` means no warp.
    pub(crate) fn warped_of_block(self, block: usize) -> Option<usize> {
        if self.has_population_block() {
            block.checked_sub(1)
        } else {
            None
        }
    }
}

/// One treatment: a level index for every factor (0 = reference).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Treatment {
    /// `"ref"`, or the non-reference levels joined with ':' in factor order.
    pub(crate) name: String,
    pub(crate) levels: Vec<usize>,
}

/// Labels, factors, treatments and the weight matrix.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Design {
    contexts: Vec<String>,
    species: Vec<String>,
    ran_levels: Vec<String>,
    factors: Vec<Factor>,
    treatments: Vec<Treatment>,
    /// W, row-major: `weights[p * T + i]` = 1 when effect i applies to treatment p.
    weights: Vec<f64>,
    /// Mixed-radix code of a level combination → treatment index.
    treatment_by_code: Vec<usize>,
    level_strides: Vec<usize>,
}

fn check_labels(kind: &str, labels: &[String], allow_empty: bool) -> Result<(), String> {
    if labels.is_empty() && !allow_empty {
        return Err(format!("at least one {kind} is required"));
    }
    let mut seen = HashSet::with_capacity(labels.len());
    for label in labels {
        if !seen.insert(label.as_str()) {
            return Err(format!("{kind} \"{label}\" appears more than once"));
        }
    }
    Ok(())
}

/// Index subsets of {0..n} of the given size, in lexicographic order.
fn subsets_of_size(n: usize, size: usize) -> Vec<Vec<usize>> {
    let mut subsets = Vec::new();
    if size == 0 || size > n {
        return subsets;
    }
    let mut current: Vec<usize> = (0..size).collect();
    loop {
        subsets.push(current.clone());
        let Some(position) = (0..size).rev().find(|&i| current[i] < n - size + i) else {
            return subsets;
        };
        current[position] += 1;
        for later in position + 1..size {
            current[later] = current[later - 1] + 1;
        }
    }
}

/// The treatment set (model vignette §3): "ref", then for every non-empty
/// subset of factors (by size, then factor order) the Cartesian product of
/// their non-reference levels, first factor outermost.
fn build_treatments(factors: &[Factor]) -> Vec<Treatment> {
    let factor_count = factors.len();
    let mut treatments = vec![Treatment {
        name: REFERENCE_TREATMENT.to_string(),
        levels: vec![0; factor_count],
    }];
    for size in 1..=factor_count {
        for subset in subsets_of_size(factor_count, size) {
            if subset.iter().any(|&f| factors[f].levels.len() < 2) {
                continue;
            }
            let mut choice = vec![1usize; size];
            loop {
                let mut levels = vec![0; factor_count];
                let mut parts = Vec::with_capacity(size);
                for (&factor, &level) in subset.iter().zip(&choice) {
                    levels[factor] = level;
                    parts.push(factors[factor].levels[level].as_str());
                }
                treatments.push(Treatment {
                    name: parts.join(":"),
                    levels,
                });
                // Odometer step: the last factor of the subset varies fastest.
                let mut position = size;
                let advanced = loop {
                    if position == 0 {
                        break false;
                    }
                    position -= 1;
                    choice[position] += 1;
                    if choice[position] < factors[subset[position]].levels.len() {
                        break true;
                    }
                    choice[position] = 1;
                };
                if !advanced {
                    break;
                }
            }
        }
    }
    treatments
}

/// Whether effect `effect` applies when predicting treatment `predicted`
/// (model vignette §3).
fn effect_applies(factors: &[Factor], predicted: &Treatment, effect: &Treatment) -> bool {
    factors.iter().enumerate().all(|(f, factor)| {
        let wanted = effect.levels[f];
        let present = predicted.levels[f];
        wanted == 0 || present == wanted || (factor.is_time_series && present >= wanted)
    })
}

impl Design {
    /// Validates the labels and factors and builds treatments and W.
    pub(crate) fn new(
        contexts: Vec<String>,
        species: Vec<String>,
        ran_levels: Vec<String>,
        factors: Vec<Factor>,
    ) -> Result<Self, String> {
        check_labels("context", &contexts, false)?;
        check_labels("species", &species, false)?;
        check_labels("random-effect level", &ran_levels, false)?;
        let factor_names: Vec<String> = factors.iter().map(|f| f.name.clone()).collect();
        check_labels("fixed-effect factor", &factor_names, true)?;
        for factor in &factors {
            check_labels(
                &format!("level of factor \"{}\"", factor.name),
                &factor.levels,
                false,
            )?;
        }
        let time_series = factors.iter().filter(|f| f.is_time_series).count();
        if time_series > 1 {
            return Err(format!(
                "at most one factor can be a time series, found {time_series}"
            ));
        }

        let mut treatment_count: usize = 1;
        for factor in &factors {
            treatment_count = treatment_count
                .checked_mul(factor.levels.len())
                .filter(|&count| count <= MAX_TREATMENTS)
                .ok_or_else(|| {
                    format!("the factors define more than {MAX_TREATMENTS} treatments")
                })?;
        }

        let treatments = build_treatments(&factors);
        debug_assert_eq!(treatments.len(), treatment_count);
        let mut names = HashSet::with_capacity(treatments.len());
        if let Some(twice) = treatments.iter().find(|t| !names.insert(t.name.as_str())) {
            return Err(format!(
                "fixed-effect levels collide: the treatment name \"{}\" stands for two \
                 different level combinations (treatment names join levels with \":\"); \
                 rename levels that contain \":\" or are named \"{REFERENCE_TREATMENT}\"",
                twice.name
            ));
        }

        let mut level_strides = vec![1usize; factors.len()];
        for f in (0..factors.len().saturating_sub(1)).rev() {
            level_strides[f] = level_strides[f + 1] * factors[f + 1].levels.len();
        }
        let mut treatment_by_code = vec![0usize; treatment_count];
        for (index, treatment) in treatments.iter().enumerate() {
            let code: usize = treatment
                .levels
                .iter()
                .zip(&level_strides)
                .map(|(level, stride)| level * stride)
                .sum();
            treatment_by_code[code] = index;
        }

        let mut weights = vec![0.0; treatment_count * treatment_count];
        for (p, predicted) in treatments.iter().enumerate() {
            for (i, effect) in treatments.iter().enumerate() {
                if effect_applies(&factors, predicted, effect) {
                    weights[p * treatment_count + i] = 1.0;
                }
            }
        }

        let design = Self {
            contexts,
            species,
            ran_levels,
            factors,
            treatments,
            weights,
            treatment_by_code,
            level_strides,
        };
        design.check_parameter_names()?;
        Ok(design)
    }

    /// Parameter names must be unique, whatever the degrees: the names of a
    /// first block of every component, every treatment and every warping
    /// factor stand for all (later blocks only change the `Blk` suffix).
    /// This is the one place where name collisions are caught.
    fn check_parameter_names(&self) -> Result<(), String> {
        let mut seen = HashSet::new();
        let mut check = |role: ParameterRole| -> Result<(), String> {
            let name = parameter_name(self, role);
            if seen.contains(&name) {
                return Err(format!(
                    "context, gene (species), random-level or treatment labels collide: two \
                     parameters would both be named \"{name}\" (parameter names join labels \
                     with \"_\"); rename labels that contain \"_\""
                ));
            }
            seen.insert(name);
            Ok(())
        };
        for component in Component::ALL {
            for context in 0..self.contexts.len() {
                for species in 0..self.species.len() {
                    for treatment in 0..self.treatments.len() {
                        check(ParameterRole::Beta {
                            component,
                            context,
                            species,
                            block: 0,
                            treatment,
                        })?;
                    }
                }
            }
        }
        for species in 0..self.species.len() {
            for ran in 0..self.ran_blocks().warped_levels() {
                for kind in WarpKind::ALL {
                    check(ParameterRole::Warp { kind, species, ran })?;
                }
            }
        }
        Ok(())
    }

    pub(crate) fn contexts(&self) -> &[String] {
        &self.contexts
    }

    pub(crate) fn species(&self) -> &[String] {
        &self.species
    }

    /// The real random-effect levels (the "none" pseudo-level is not listed).
    pub(crate) fn ran_levels(&self) -> &[String] {
        &self.ran_levels
    }

    pub(crate) fn ran_blocks(&self) -> RanBlocks {
        RanBlocks::new(self.ran_levels.len())
    }

    pub(crate) fn factors(&self) -> &[Factor] {
        &self.factors
    }

    pub(crate) fn treatments(&self) -> &[Treatment] {
        &self.treatments
    }

    pub(crate) fn treatment_count(&self) -> usize {
        self.treatments.len()
    }

    pub(crate) fn treatment_names(&self) -> Vec<String> {
        self.treatments.iter().map(|t| t.name.clone()).collect()
    }

    /// The treatments (columns of W) that `names` select for a reduced
    /// model: an effect's name (`"KO"`, `"KO:right"`) selects that effect, a
    /// factor's name every effect that involves the factor (its main effect
    /// and its interactions). Sorted, without repeats.
    pub(crate) fn effects_named(&self, names: &[String]) -> Result<Vec<usize>, String> {
        let mut selected = Vec::new();
        for name in names {
            if let Some(t) = self.treatments.iter().skip(1).position(|t| &t.name == name) {
                selected.push(t + 1);
            } else if let Some(f) = self.factors.iter().position(|f| &f.name == name) {
                selected.extend(
                    (1..self.treatments.len()).filter(|&t| self.treatments[t].levels[f] != 0),
                );
            } else {
                let effects: Vec<&str> = self.treatments[1..]
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect();
                let factors: Vec<&str> = self.factors.iter().map(|f| f.name.as_str()).collect();
                return Err(format!(
                    "\"{name}\" is neither an effect of this design ({}) nor a factor ({})",
                    quoted_list(&effects),
                    quoted_list(&factors)
                ));
            }
        }
        selected.sort_unstable();
        selected.dedup();
        Ok(selected)
    }

    /// W row-major (T×T).
    pub(crate) fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Row `predicted` of W: which effects add up for that treatment.
    pub(crate) fn weight_row(&self, predicted: usize) -> &[f64] {
        let count = self.treatment_count();
        &self.weights[predicted * count..(predicted + 1) * count]
    }

    /// The treatment with the given level index per factor (0 = reference).
    pub(crate) fn treatment_index(&self, levels: &[usize]) -> Option<usize> {
        if levels.len() != self.factors.len() {
            return None;
        }
        let mut code = 0;
        for ((&level, factor), stride) in levels.iter().zip(&self.factors).zip(&self.level_strides)
        {
            if level >= factor.levels.len() {
                return None;
            }
            code += level * stride;
        }
        self.treatment_by_code.get(code).copied()
    }
}

/// `"a", "b"`, or "none" for an empty list.
fn quoted_list(items: &[&str]) -> String {
    if items.is_empty() {
        return "none".into();
    }
    items
        .iter()
        .map(|i| format!("\"{i}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(prefix: &str, count: usize) -> Vec<String> {
        (1..=count).map(|i| format!("{prefix}{i}")).collect()
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    fn hemisphere_and_age() -> Vec<Factor> {
        vec![
            Factor::new("hemisphere", strings(&["left", "right"])),
            Factor::time_series("age", strings(&["7", "12", "18"])),
        ]
    }

    fn design_with(contexts: usize, species: usize, ran: usize, factors: Vec<Factor>) -> Design {
        Design::new(
            labels("ctx", contexts),
            labels("gene", species),
            labels("mouse", ran),
            factors,
        )
        .unwrap()
    }

    /// A two-level factor whose levels carry its name, so that treatment
    /// names stay distinct.
    fn binary(name: &str) -> Factor {
        Factor::new(name, vec![format!("{name}a"), format!("{name}b")])
    }

    fn layout_for(design: &Design, degrees: Vec<usize>) -> ParameterLayout {
        let structure =
            Structure::new(design.contexts().len(), design.species().len(), degrees).unwrap();
        ParameterLayout::new(design, &structure).unwrap()
    }

    #[test]
    fn treatments_follow_subset_then_cartesian_order_with_colon_names() {
        let design = design_with(1, 1, 1, hemisphere_and_age());
        assert_eq!(
            design.treatment_names(),
            strings(&["ref", "right", "12", "18", "right:12", "right:18"])
        );
    }

    #[test]
    fn cartesian_products_vary_the_last_factor_fastest() {
        let factors = vec![
            Factor::new("f", strings(&["f0", "f1", "f2"])),
            Factor::new("g", strings(&["g0", "g1", "g2"])),
            Factor::new("h", strings(&["h0", "h1"])),
        ];
        let design = design_with(1, 1, 1, factors);
        assert_eq!(
            design.treatment_names(),
            strings(&[
                "ref", "f1", "f2", "g1", "g2", "h1", "f1:g1", "f1:g2", "f2:g1", "f2:g2", "f1:h1",
                "f2:h1", "g1:h1", "g2:h1", "f1:g1:h1", "f1:g2:h1", "f2:g1:h1", "f2:g2:h1",
            ])
        );
        assert_eq!(design.treatment_count(), 18);
    }

    #[test]
    fn weight_matrix_matches_the_hemisphere_by_age_example() {
        let design = design_with(1, 1, 1, hemisphere_and_age());
        #[rustfmt::skip]
        let expected = [
            1.0, 0.0, 0.0, 0.0, 0.0, 0.0,
            1.0, 1.0, 0.0, 0.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 0.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 1.0, 0.0, 0.0,
            1.0, 1.0, 1.0, 0.0, 1.0, 0.0,
            1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
        ];
        assert_eq!(design.weights(), &expected[..]);
        assert_eq!(design.weight_row(3), &expected[18..24]);
    }

    #[test]
    fn weights_without_time_series_require_every_component() {
        let factors = vec![binary("x"), binary("y")];
        let design = design_with(1, 1, 1, factors);
        // ref, x=b, y=b, x=b:y=b
        #[rustfmt::skip]
        let expected = [
            1.0, 0.0, 0.0, 0.0,
            1.0, 1.0, 0.0, 0.0,
            1.0, 0.0, 1.0, 0.0,
            1.0, 1.0, 1.0, 1.0,
        ];
        assert_eq!(design.weights(), &expected[..]);
    }

    #[test]
    fn treatment_index_finds_every_level_combination() {
        let design = design_with(1, 1, 1, hemisphere_and_age());
        for (index, treatment) in design.treatments().iter().enumerate() {
            assert_eq!(design.treatment_index(&treatment.levels), Some(index));
        }
        assert_eq!(design.treatment_index(&[1, 2]), Some(5));
        assert_eq!(design.treatment_index(&[2, 0]), None);
        assert_eq!(design.treatment_index(&[0]), None);
    }

    #[test]
    fn no_factors_means_a_single_reference_treatment() {
        let design = design_with(1, 1, 1, vec![]);
        assert_eq!(design.treatment_names(), strings(&["ref"]));
        assert_eq!(design.weights(), &[1.0]);
        assert_eq!(design.treatment_index(&[]), Some(0));
    }

    #[test]
    fn invalid_designs_are_rejected() {
        let one = |prefix: &str| labels(prefix, 1);
        assert!(Design::new(vec![], one("s"), one("r"), vec![]).is_err());
        assert!(Design::new(one("c"), one("s"), strings(&["m", "m"]), vec![]).is_err());
        let two_time = vec![
            Factor::time_series("t1", strings(&["1", "2"])),
            Factor::time_series("t2", strings(&["1", "2"])),
        ];
        assert!(Design::new(one("c"), one("s"), one("r"), two_time).is_err());
        let empty_factor = vec![Factor::new("x", vec![])];
        assert!(Design::new(one("c"), one("s"), one("r"), empty_factor).is_err());
        let same_name = vec![binary("x"), binary("x")];
        assert!(Design::new(one("c"), one("s"), one("r"), same_name).is_err());
        let too_many: Vec<Factor> = (0..13).map(|i| binary(&format!("f{i}"))).collect();
        assert!(Design::new(one("c"), one("s"), one("r"), too_many).is_err());
        assert!(Structure::new(2, 2, vec![1, 2, 3]).is_err());
        assert!(Structure::new(1, 1, vec![MAX_DEGREE + 1]).is_err());
    }

    #[test]
    fn names_that_would_collide_are_refused_in_one_place() {
        let one = |prefix: &str| labels(prefix, 1);
        // "y:z" of one factor against y and z of two.
        let colons = vec![
            Factor::new("a", strings(&["x", "y", "y:z"])),
            Factor::new("b", strings(&["w", "z"])),
        ];
        let error = Design::new(one("c"), one("s"), one("r"), colons).unwrap_err();
        assert!(error.contains("\"y:z\""), "{error}");
        // A non-reference level named like the reference treatment.
        let named_ref = vec![Factor::new("h", strings(&["a", "ref"]))];
        let error = Design::new(one("c"), one("s"), one("r"), named_ref).unwrap_err();
        assert!(error.contains("treatment name \"ref\""), "{error}");
        // Labels joined with "_": context a_b with gene c, context a with
        // gene b_c give the same effect names.
        let error = Design::new(
            strings(&["a", "a_b"]),
            strings(&["b_c", "c"]),
            one("r"),
            vec![binary("x")],
        )
        .unwrap_err();
        assert!(error.contains("\"beta_Rt_a_b_c_xb_X_Tns/Blk1\""), "{error}");
        // Collisions of later components are caught too: the transition
        // names of (a_Rt, b) and (a, Rt_b) differ only for tslope.
        let error = Design::new(
            strings(&["a", "a_tslope"]),
            strings(&["b", "tslope_b"]),
            one("r"),
            vec![],
        )
        .unwrap_err();
        assert!(error.contains("tslope"), "{error}");
        // Warping factors: mouse "m_X" of gene "g" against mouse "m" of gene "X_g".
        let error = Design::new(
            one("c"),
            strings(&["X_g", "g"]),
            strings(&["m", "m_X"]),
            vec![],
        )
        .unwrap_err();
        assert!(error.contains("wfactor_"), "{error}");
        assert!(Design::new(
            one("c"),
            strings(&["g1", "g2"]),
            strings(&["m1", "m2"]),
            vec![]
        )
        .is_ok());
    }

    #[test]
    fn parameter_counts_match_the_documented_models() {
        // Cortex RORB: C=1, S=6, T=4, R=4, Σd=17.
        let cortex = design_with(1, 6, 4, vec![binary("x"), binary("y")]);
        let layout = layout_for(&cortex, vec![3, 3, 3, 3, 3, 2]);
        assert_eq!(layout.len(), 300);
        assert_eq!(layout.tested_effect_count(), 171);
        assert_eq!(layout.boundary_distance_count(), 1260);

        // Time series: C=1, S=6, T=6, R=5, Σd=16.
        let time = design_with(1, 6, 5, hemisphere_and_age());
        assert_eq!(layout_for(&time, vec![3, 3, 3, 3, 2, 2]).len(), 414);

        // Two cell types: C=2, S=6, T=6, R=5, Σd=43.
        let two = design_with(2, 6, 5, hemisphere_and_age());
        let degrees = vec![4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 2, 2];
        assert_eq!(layout_for(&two, degrees).len(), 936);

        // Liver: C=1, S=6, T=4, R=10, Σd=6.
        let liver = design_with(1, 6, 10, vec![binary("x"), binary("y")]);
        let layout = layout_for(&liver, vec![1; 6]);
        assert_eq!(layout.len(), 276);
        assert_eq!(layout.tested_effect_count(), 72);

        // Small worked example: genes A (d=2), B (d=0), T=2, R=3.
        let small = design_with(1, 2, 3, vec![binary("x")]);
        let layout = layout_for(&small, vec![2, 0]);
        assert_eq!(layout.len(), 34);
        assert_eq!(layout.tested_effect_count(), 8);
        assert_eq!(layout.boundary_distance_count(), 72);

        // Poisson tutorial: a single ran level carries no warping.
        let poisson = design_with(1, 1, 1, vec![]);
        let layout = layout_for(&poisson, vec![3]);
        assert_eq!(layout.len(), 10);
        assert_eq!(layout.boundary_distance_count(), 11);
    }

    #[test]
    fn names_follow_the_naming_scheme_in_layout_order() {
        let design = Design::new(
            strings(&["ctx"]),
            strings(&["A", "B"]),
            strings(&["m1", "m2"]),
            vec![Factor::new("genotype", strings(&["wt", "ko"]))],
        )
        .unwrap();
        let layout = layout_for(&design, vec![1, 0]);
        let expected = strings(&[
            "baseline_ctx_Rt_A_Tns/Blk1",
            "beta_Rt_ctx_A_ko_X_Tns/Blk1",
            "baseline_ctx_Rt_A_Tns/Blk2",
            "beta_Rt_ctx_A_ko_X_Tns/Blk2",
            "baseline_ctx_Rt_B_Tns/Blk1",
            "beta_Rt_ctx_B_ko_X_Tns/Blk1",
            "baseline_ctx_tslope_A_Tns/Blk1",
            "beta_tslope_ctx_A_ko_X_Tns/Blk1",
            "baseline_ctx_tpoint_A_Tns/Blk1",
            "beta_tpoint_ctx_A_ko_X_Tns/Blk1",
            "wfactor_point_m1_X_A",
            "wfactor_rate_m1_X_A",
            "wfactor_slope_m1_X_A",
            "wfactor_point_m2_X_A",
            "wfactor_rate_m2_X_A",
            "wfactor_slope_m2_X_A",
            "wfactor_point_m1_X_B",
            "wfactor_rate_m1_X_B",
            "wfactor_slope_m1_X_B",
            "wfactor_point_m2_X_B",
            "wfactor_rate_m2_X_B",
            "wfactor_slope_m2_X_B",
        ]);
        assert_eq!(layout.names(&design), expected);
    }

    #[test]
    fn index_maps_agree_with_the_names() {
        let design = Design::new(
            strings(&["ctx"]),
            strings(&["A", "B"]),
            strings(&["m1", "m2"]),
            vec![Factor::new("genotype", strings(&["wt", "ko"]))],
        )
        .unwrap();
        let layout = layout_for(&design, vec![1, 0]);
        let names = layout.names(&design);
        let at = |index: Option<usize>| names[index.unwrap()].clone();
        assert_eq!(
            at(layout.beta_index(Component::Rate, 0, 0, 1, 1)),
            "beta_Rt_ctx_A_ko_X_Tns/Blk2"
        );
        assert_eq!(
            at(layout.beta_index(Component::Point, 0, 0, 0, 0)),
            "baseline_ctx_tpoint_A_Tns/Blk1"
        );
        assert_eq!(layout.beta_index(Component::Slope, 0, 1, 0, 0), None);
        assert_eq!(layout.beta_index(Component::Rate, 0, 1, 1, 0), None);
        assert_eq!(layout.beta_index(Component::Rate, 0, 0, 0, 2), None);
        assert_eq!(
            at(layout.warp_index(WarpKind::Rate, 1, 0)),
            "wfactor_rate_m1_X_B"
        );
        assert_eq!(
            at(layout.warp_index(WarpKind::Slope, 0, 1)),
            "wfactor_slope_m2_X_A"
        );
        assert_eq!(layout.warp_index(WarpKind::Point, 0, 2), None);
        assert_eq!(layout.warp_start(), 10);
    }

    #[test]
    fn ran_blocks_put_the_population_level_first() {
        let many = RanBlocks::new(3);
        assert_eq!(many.count(), 4);
        assert_eq!(many.real_of_block(0), None);
        assert_eq!(many.real_of_block(2), Some(1));
        assert_eq!(many.warped_of_block(3), Some(2));
        assert_eq!(many.block_of_real(0), 1);
        let single = RanBlocks::new(1);
        assert_eq!(single.count(), 1);
        assert_eq!(single.real_of_block(0), Some(0));
        assert_eq!(single.warped_of_block(0), None);
        assert_eq!(single.warped_levels(), 0);
    }
}
