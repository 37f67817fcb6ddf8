//! The description of a fitted count plan for R: its parameter table,
//! treatments, summed table, dispersions and random-effect SDs.

use super::convert::design_fields;
use super::nb::count_plan;
use super::RResult;
use crate::design::{ParameterRole, WarpKind};
use crate::error::Error;
use crate::nb::layout::{CountLayout, CountRole};
use crate::nb::predict;
use crate::nb::redraw::{animal_groups, between_animal_factors};
use crate::nb::report::warp_slot;
use extendr_api::prelude::*;

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

/// Describe a count fit: parameters, design, curves and dispersions, the
/// random-effect SDs, the animals' groups, each gene's own fit. Every
/// parameter comes with its labels; the summed table's rows come from
/// count_summed_table_rust().
/// @keywords internal
/// @noRd
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
    // Each gene's own fit, for the quality-control table of a panel, with
    // its observed rows and their summed count (a gene without any count
    // is named there).
    let observed = table.observed();
    let observed_totals: Vec<(usize, f64)> = (0..shape.species)
        .map(|s| {
            let counts = table.counts(s);
            (0..table.key_count())
                .filter(|&key| observed[key])
                .fold((0, 0.0), |(rows, total), key| {
                    (rows + 1, total + counts[key])
                })
        })
        .collect();
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
            .collect::<Vec<String>>(),
        observed_rows = fits
            .iter()
            .map(|f| observed_totals[f.species].0 as f64)
            .collect::<Vec<f64>>(),
        observed_count = fits
            .iter()
            .map(|f| observed_totals[f.species].1)
            .collect::<Vec<f64>>()
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

/// The summed table of a count fit at `parameters` (R's count.data.summed),
/// column by column, written straight into R vectors: bin, count, exposure,
/// pred (the expected count), count_log, pred_log (Ψ), and the 1-based
/// codes of context, species, ran (1: the population) and treatment into
/// the level vectors that come with them. Count, exposure and count_log
/// are NA on population rows.
/// @keywords internal
/// @noRd
#[extendr]
fn count_summed_table_rust(plan: Raw, parameters: Vec<f64>) -> RResult<List> {
    let plan = count_plan(&plan)?;
    let model = &plan.model;
    let design = model.design();
    let predictions = predict::predictions_at(model, &parameters).map_err(Error::input)?;
    let rows = predict::summed_row_count(model);
    let mut bin = Integers::new(rows);
    let (mut context, mut species, mut ran, mut treatment) = (
        Integers::new(rows),
        Integers::new(rows),
        Integers::new(rows),
        Integers::new(rows),
    );
    let (mut count, mut exposure, mut expected, mut count_log, mut psi) = (
        Doubles::new(rows),
        Doubles::new(rows),
        Doubles::new(rows),
        Doubles::new(rows),
        Doubles::new(rows),
    );
    let code = |index: usize| Rint::from(index as i32 + 1);
    predict::visit_summed_rows(model, &predictions, |i, row| {
        bin[i] = Rint::from(row.bin as i32);
        context[i] = code(row.context);
        species[i] = code(row.species);
        ran[i] = row.ran.map_or(Rint::from(1), |r| code(r + 1));
        treatment[i] = code(row.treatment);
        let (y, e) = row.observed.map_or((Rfloat::na(), Rfloat::na()), |(y, e)| {
            (Rfloat::from(y), Rfloat::from(e))
        });
        count[i] = y;
        exposure[i] = e;
        expected[i] = Rfloat::from(row.expected());
        count_log[i] = row.observed_psi().map_or(Rfloat::na(), Rfloat::from);
        psi[i] = Rfloat::from(row.psi);
    });
    Ok(list!(
        bin = bin,
        count = count,
        exposure = exposure,
        pred = expected,
        count_log = count_log,
        pred_log = psi,
        context = context,
        species = species,
        ran = ran,
        treatment = treatment,
        context_levels = design.contexts().to_vec(),
        species_levels = design.species().to_vec(),
        ran_levels = design.ran_levels().to_vec(),
        treatment_levels = design.treatment_names()
    ))
}

extendr_module! {
    mod nb_describe;
    fn count_describe_rust;
    fn count_summed_table_rust;
}
