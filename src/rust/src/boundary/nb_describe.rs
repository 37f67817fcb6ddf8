//! The description of a fitted count plan for R: its parameter table,
//! treatments, summed table, dispersions and random-effect SDs.

use super::convert::design_fields;
use super::nb::count_plan;
use super::RResult;
use crate::design::{ParameterRole, WarpKind};
use crate::error::Error;
use crate::nb::layout::{CountLayout, CountRole};
use crate::nb::redraw::{animal_groups, between_animal_factors};
use crate::nb::report::warp_slot;
use extendr_api::prelude::*;

/// Describe a count fit: parameters, design, curves, the observed rows and
/// the population rows, the random-effect SDs, the animals' groups. Every
/// row comes with its labels.
/// @keywords internal
/// @noRd
/// A parameter's role, component and labels (context, species, block,
/// treatment, random level), as count_describe_rust() reports them.
type RoleLabels<'a> = (
    &'a str,
    &'a str,
    Option<String>,
    Option<String>,
    Option<i32>,
    Option<String>,
    Option<String>,
);

#[extendr]
fn count_describe_rust(plan: Raw) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let model = &plan.model;
    let design = model.design();
    let table = model.table();
    let shape = table.shape();
    let layout = CountLayout::new(design, model.structure()).map_err(Error::input)?;
    let roles = layout.roles();
    let label = |v: &[String], i: usize| Some(v[i].clone());
    let mut name = layout.names(design);
    let (mut role, mut component, mut context, mut species, mut block, mut treatment, mut ran) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in &roles {
        let (ro, co, cx, sp, bl, tr, ra): RoleLabels = match *r {
            CountRole::Original(ParameterRole::Beta {
                component,
                context,
                species,
                block,
                treatment,
            }) => (
                if treatment == 0 { "baseline" } else { "beta" },
                component.name(),
                label(design.contexts(), context),
                label(design.species(), species),
                Some(block as i32 + 1),
                Some(design.treatments()[treatment].name.clone()),
                None,
            ),
            CountRole::Original(ParameterRole::Warp { kind, species, ran }) => (
                "warp",
                kind.name(),
                None,
                label(design.species(), species),
                None,
                None,
                label(design.ran_levels(), ran),
            ),
            CountRole::Deviation { kind, species } => (
                "sd",
                kind.name(),
                None,
                label(design.species(), species),
                None,
                None,
                None,
            ),
            CountRole::Dispersion { context, species } => (
                "dispersion",
                "dispersion",
                label(design.contexts(), context),
                label(design.species(), species),
                None,
                None,
                None,
            ),
        };
        role.push(ro);
        component.push(co);
        context.push(cx);
        species.push(sp);
        block.push(bl);
        treatment.push(tr);
        ran.push(ra);
    }
    let parameters = list!(
        name = std::mem::take(&mut name),
        role = role,
        component = component,
        context = context,
        species = species,
        block = block,
        treatment = treatment,
        ran = ran
    );
    // Observed rows: species, then the table's key order (animal, context, treatment, bin).
    let treatment_names = design.treatment_names();
    let (
        mut row_ran,
        mut row_context,
        mut row_species,
        mut row_treatment,
        mut row_bin,
        mut row_count,
        mut row_exposure,
    ) = (vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let observed = table.observed();
    for s in 0..shape.species {
        let (counts, exposures) = (table.counts(s), table.exposures(s));
        for r in 0..shape.ran_levels {
            for c in 0..shape.contexts {
                for (t, treatment_name) in treatment_names.iter().enumerate() {
                    let first = table.block_key(r, c, t);
                    for b in 0..shape.bins {
                        if !observed[first + b] {
                            continue;
                        }
                        row_ran.push(design.ran_levels()[r].as_str());
                        row_context.push(design.contexts()[c].as_str());
                        row_species.push(design.species()[s].as_str());
                        row_treatment.push(treatment_name.as_str());
                        row_bin.push(b as i32 + 1);
                        row_count.push(counts[first + b]);
                        row_exposure.push(exposures[first + b]);
                    }
                }
            }
        }
    }
    let rows = list!(
        ran = row_ran,
        context = row_context,
        species = row_species,
        treatment = row_treatment,
        bin = row_bin,
        count = row_count,
        exposure = row_exposure
    );
    let (mut pop_context, mut pop_species, mut pop_treatment, mut pop_bin) =
        (vec![], vec![], vec![], vec![]);
    for s in 0..shape.species {
        for c in 0..shape.contexts {
            for treatment_name in &treatment_names {
                for b in 1..=shape.bins {
                    pop_context.push(design.contexts()[c].as_str());
                    pop_species.push(design.species()[s].as_str());
                    pop_treatment.push(treatment_name.as_str());
                    pop_bin.push(b as i32);
                }
            }
        }
    }
    let population = list!(
        context = pop_context,
        species = pop_species,
        treatment = pop_treatment,
        bin = pop_bin
    );
    let (mut curve_context, mut curve_species, mut degree, mut dispersion) =
        (vec![], vec![], vec![], vec![]);
    for (c, context_name) in design.contexts().iter().enumerate() {
        for (s, species_name) in design.species().iter().enumerate() {
            curve_context.push(context_name.as_str());
            curve_species.push(species_name.as_str());
            degree.push(model.structure().degree(c, s) as i32);
            dispersion.push(plan.estimate.species[s].state.rho[c].exp());
        }
    }
    let curves = list!(
        context = curve_context,
        species = curve_species,
        degree = degree,
        dispersion = dispersion
    );
    // Each gene's own fit, for the quality-control table of a panel.
    let fits = &plan.estimate.species;
    let species_fits = list!(
        species = fits
            .iter()
            .map(|f| design.species()[f.species].as_str())
            .collect::<Vec<&str>>(),
        converged = fits.iter().map(|f| f.converged).collect::<Vec<bool>>(),
        fitted = fits.iter().map(|f| !f.has_failed()).collect::<Vec<bool>>(),
        iterations = fits
            .iter()
            .map(|f| f.iterations as f64)
            .collect::<Vec<f64>>(),
        scaled_gradient = fits.iter().map(|f| f.scaled_gradient).collect::<Vec<f64>>(),
        on_bound = fits.iter().map(|f| f.on_bound as f64).collect::<Vec<f64>>(),
        stop = fits
            .iter()
            .map(|f| f.stop.clone().unwrap_or_default())
            .collect::<Vec<String>>()
    );
    let sd = List::from_pairs(WarpKind::ALL.iter().map(|&kind| {
        (
            kind.name(),
            r!(plan
                .estimate
                .species
                .iter()
                .map(|f| f.sigma[warp_slot(kind)])
                .collect::<Vec<f64>>()),
        )
    }));
    let mut fields = design_fields(design);
    fields.extend([
        ("parameters", parameters.into()),
        ("ran_levels", r!(design.ran_levels().to_vec())),
        ("bins", r!(shape.bins as i32)),
        ("curves", curves.into()),
        ("rows", rows.into()),
        ("population", population.into()),
        ("sd", sd.into()),
        ("species_fits", species_fits.into()),
        ("exposure", r!(table.exposure_kind().name())),
        ("between", r!(between_animal_factors(model))),
        (
            "groups",
            r!(animal_groups(model)
                .iter()
                .map(|&g| g as i32 + 1)
                .collect::<Vec<i32>>()),
        ),
        ("likelihood", r!("nb")),
        (
            "held_effects",
            r!(model
                .held_effects()
                .iter()
                .map(|&t| design.treatments()[t].name.clone())
                .collect::<Vec<String>>()),
        ),
    ]);
    Ok(List::from_pairs(fields))
}

extendr_module! {
    mod nb_describe;
    fn count_describe_rust;
}
