# The package's main job: fit the bundled example data, bootstrap it on the
# fork engine, print the fixed effects and write the rate-count plot.
library(wispack)
options(width = 160)

cat("wispack", format(utils::packageVersion("wispack")), "\n\n")
cat("Example data: ", nrow(wisp_example), " tokens of ",
    length(unique(wisp_example$species)), " genes, ",
    length(unique(wisp_example$ran)), " mice, hemisphere x age.\n\n", sep = "")

workers <- min(2L, parallel::detectCores())
fit <- wisp(wisp_example, bootstraps.num = 200, max.fork = workers, ran.seed = 1)
cat("\n")
print(summary(fit))

truth <- attr(wisp_example, "truth")
effects <- fit$stats$parameters
effects <- effects[match(names(truth$effects), effects$parameter), ]
cat("\nTrue rate effects against the estimates:\n")
rate <- fit$parameters$component[match(effects$parameter, fit$parameters$name)] == "Rt"
print(data.frame(parameter = effects$parameter[rate], truth = unname(truth$effects[rate]),
                 estimate = round(effects$estimate[rate], 3),
                 CI.low = round(effects$CI.low[rate], 3), CI.high = round(effects$CI.high[rate], 3),
                 significance = effects$significance[rate]), row.names = FALSE)

output <- file.path(getwd(), "wisp_example_ratecount.png")
plot <- plot(fit, type = "ratecount")
ggplot2::ggsave(output, plot, width = 10, height = 7, dpi = 100)
cat("\nRate-count plot written to", output, "\n")
